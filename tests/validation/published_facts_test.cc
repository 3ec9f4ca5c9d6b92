// The facts about published runs (validation/published/run_facts.json, published_facts.h): the
// strict loader, the rules that match facts to records (names, dates, conditions), and the
// mapping driven by the facts rather than by code.
#include "meshsim/validation/published_facts.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "meshsim/sim/error.h"
#include "meshsim/validation/published.h"
#include "published_internal.h"
#include "published_test_util.h"

namespace meshsim::validation::test {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kFacts = kSource + "/validation/published/run_facts.json";

std::string facts_text() {
  std::ifstream in(kFacts);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The InputError location of parsing `doc`.
std::string location_of_error(const nlohmann::json& doc) {
  try {
    PublishedFacts::parse(doc.dump(), "facts.json");
  } catch (const InputError& e) {
    EXPECT_EQ(e.source(), "facts.json");
    return e.location() + ": " + e.message();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

TEST(PublishedFacts, TheBuiltInFileIsTheCommittedOneAndEveryFactHasItsSource) {
  const PublishedFacts& facts = PublishedFacts::builtin();
  const PublishedFacts file = PublishedFacts::parse(facts_text(), kFacts);
  EXPECT_EQ(file.frameworks.size(), facts.frameworks.size());
  EXPECT_EQ(file.source_facts.size(), facts.source_facts.size());
  EXPECT_FALSE(facts.frameworks.empty());
  for (const FrameworkFact& f : facts.frameworks) {
    EXPECT_FALSE(f.source.empty()) << f.id;
  }
  for (const SourceFact& f : facts.source_facts) {
    EXPECT_FALSE(f.source.empty());
  }
  for (const HardwareFact& h : facts.hardware) {
    EXPECT_FALSE(h.source.empty()) << h.keys.front();
  }
}

// Every chip of the collection's hardware.json has a hardware entry: a cluster, or a refusal
// that says why.
TEST(PublishedFacts, EveryHardwareKeyOfTheCollectionHasAnEntry) {
  std::ifstream in(kSource + "/validation/published/hardware.json");
  const nlohmann::json hardware = nlohmann::json::parse(in);
  std::set<std::string> keys;
  for (const HardwareFact& h : PublishedFacts::builtin().hardware) {
    keys.insert(h.keys.begin(), h.keys.end());
  }
  for (const nlohmann::json& chip : hardware) {
    EXPECT_TRUE(keys.contains(chip.at("key").get<std::string>())) << chip.at("key");
  }
}

TEST(PublishedFacts, LoaderIsStrictAndNamesThePointer) {
  const nlohmann::json good = nlohmann::json::parse(facts_text());
  nlohmann::json doc = good;
  doc["frameworks"][0]["bogus"] = 1;
  EXPECT_THAT(location_of_error(doc), HasSubstr("/frameworks/0/bogus"));
  doc = good;
  doc["frameworks"][0]["until"] = "2022-13";
  EXPECT_THAT(location_of_error(doc), HasSubstr("/frameworks/0/until: \"2022-13\" is not a month"));
  doc = good;
  doc["frameworks"][0]["stack"] = "megatron-1999";
  EXPECT_THAT(location_of_error(doc), HasSubstr("/frameworks/0/stack"));
  doc = good;
  doc["source_facts"][0]["match"]["framework"] = "no-such-framework";
  EXPECT_THAT(location_of_error(doc), HasSubstr("no framework \"no-such-framework\""));
  doc = good;
  doc["source_facts"][0].erase("source");
  EXPECT_THAT(location_of_error(doc), HasSubstr("/source_facts/0/source"));
  doc = good;
  doc["tpu_slices"]["2d"][0] = nlohmann::json::array({4, {2, 3}});
  EXPECT_THAT(location_of_error(doc), HasSubstr("multiplying to the chips"));
  doc = good;
  doc["hardware"][1]["keys"] = doc["hardware"][0]["keys"];
  EXPECT_THAT(location_of_error(doc), HasSubstr("is listed twice"));
}

TEST(PublishedFacts, NameWordsSplitAtPunctuationAndWhereLettersMeetDigits) {
  EXPECT_THAT(name_words("Llama-3.1-70B"), ElementsAre("llama", "3", "1", "70b"));
  EXPECT_THAT(name_words("QWEN3_235B_a22B (tokendrop)"),
              ElementsAre("qwen", "3", "235b", "a", "22b", "tokendrop"));
  EXPECT_THAT(name_words("LLaMA 30B"), ElementsAre("llama", "30b"));  // not Llama 3
  EXPECT_THAT(name_words("Mixtral 8x7B"), ElementsAre("mixtral", "8x", "7b"));
  EXPECT_TRUE(name_words(" -- ").empty());
}

// A run's date: the framework text's year or container version first, then the citation's arXiv
// id, then a date in the citation; a year alone is its July.
TEST(PublishedFacts, RunDateFromFrameworkThenCitation) {
  PublishedRun r;
  r.framework = "Megatron-LM (2021)";
  EXPECT_EQ(detail::run_date(r)->when, (YearMonth{2021, 7}));
  r.framework = "NeMo 24.03.01.framework";
  EXPECT_EQ(detail::run_date(r)->when, (YearMonth{2024, 3}));
  r.framework = "Megatron-Core r0.8.0";  // a version, not a date
  r.citation = "Korthikanti et al., MLSys 2023 / arXiv:2205.05198";
  EXPECT_EQ(detail::run_date(r)->when, (YearMonth{2022, 5}));
  EXPECT_THAT(detail::run_date(r)->basis, HasSubstr("arXiv"));
  r.citation = "NVIDIA/Megatron-LM README.md (commit d98e8a64dd; image added 2024-07-15)";
  EXPECT_EQ(detail::run_date(r)->when, (YearMonth{2024, 7}));
  r.citation = "commit 2021abcd (no date)";  // a hash's digits are not a year
  EXPECT_FALSE(detail::run_date(r).has_value());
}

// The framework's era decides its stack: the same Megatron-LM record dated 2021 runs the stack of
// its time, undated or dated later today's.
TEST(PublishedFacts, FrameworkEraByDate) {
  const topology::Catalogue cat = topology::Catalogue::builtin();
  PublishedRun r = dev_run("mlm2021-t1-7.5B-128xA100");
  r.measured = {"step_time", 3.7, "s"};  // Narayanan's FLOP convention is the 2021 era's
  const auto stack_of = [&](const PublishedRun& run) {
    const PublishedMapping m = map_published_run(run, cat);
    EXPECT_TRUE(std::holds_alternative<PublishedScenario>(m)) << std::get<NotExpressible>(m).reason;
    return std::get<PublishedScenario>(m).plan.stack;
  };
  EXPECT_EQ(stack_of(r), workloads::Stack::kMegatron2021);
  r.framework = "Megatron-LM (2024)";
  EXPECT_EQ(stack_of(r), workloads::Stack::kMegatron);
  r.framework = "Megatron-LM";  // dated by the citation's arXiv id: 2021-04
  EXPECT_EQ(stack_of(r), workloads::Stack::kMegatron2021);
  r.citation = "a table";  // no date at all: not the dated era
  EXPECT_EQ(stack_of(r), workloads::Stack::kMegatron);
}

// The mapping follows the facts it is given: a hardware entry removed, the run has no cluster; a
// source fact added, it applies where its conditions hold, with its source in the assumptions.
TEST(PublishedFacts, MappingFollowsTheFactsGiven) {
  const topology::Catalogue cat = topology::Catalogue::builtin();
  const PublishedRun& r = dev_run("dgxc2504-llama3.1-8b-32xH100-bf16");
  nlohmann::json doc = nlohmann::json::parse(facts_text());
  nlohmann::json edited = doc;
  edited["hardware"].erase(0);  // H100-SXM5-80GB
  const PublishedMapping none =
      map_published_run(r, cat, PublishedFacts::parse(edited.dump(), "edited.json"));
  ASSERT_TRUE(std::holds_alternative<NotExpressible>(none));
  EXPECT_THAT(std::get<NotExpressible>(none).reason, HasSubstr("has no cluster preset"));

  edited = doc;
  nlohmann::json fact = nlohmann::json::object();
  fact["match"] = {{"citation_prefix", "NVIDIA/dgxc-benchmarking llama3.1"}, {"tp", 1}};
  fact["set"] = {{"recompute", "full"}};
  fact["source"] = "a test's script";
  edited["source_facts"].insert(edited["source_facts"].begin(), fact);
  const PublishedFacts facts = PublishedFacts::parse(edited.dump(), "edited.json");
  const PublishedMapping m = map_published_run(r, cat, facts);
  ASSERT_TRUE(std::holds_alternative<PublishedScenario>(m)) << std::get<NotExpressible>(m).reason;
  ASSERT_FALSE(r.parallelism.recompute.has_value());
  EXPECT_EQ(std::get<PublishedScenario>(m).plan.recompute, workloads::Recompute::kFull);
  EXPECT_THAT(std::get<PublishedScenario>(m).assumptions,
              Contains(HasSubstr("recompute full: not in the record, but a test's script")));
  PublishedRun tp2 = r;  // a condition that does not hold: the fact does not apply
  tp2.parallelism.tp = 2;
  tp2.parallelism.dp = 8;  // tp 2 x cp 2 x dp 8 = 32
  const PublishedMapping other = map_published_run(tp2, cat, facts);
  ASSERT_TRUE(std::holds_alternative<PublishedScenario>(other));
  EXPECT_EQ(std::get<PublishedScenario>(other).plan.recompute, workloads::Recompute::kNone);
}

}  // namespace
}  // namespace meshsim::validation::test
