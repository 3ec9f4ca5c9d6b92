// A published run against the facts (published_facts.h): its date, its framework, its model entry
// and the source facts that hold for it. Rules only: every name, window and condition is data.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "meshsim/sim/unit_parse.h"
#include "published_internal.h"

namespace meshsim::validation::detail {
namespace {

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// The runs of letters and digits of `text`, with where each starts.
struct Token {
  std::string_view text;
  size_t at;
};
std::vector<Token> tokens(std::string_view text) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < text.size()) {
    if (!is_alnum(text[i])) {
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < text.size() && is_alnum(text[i])) {
      ++i;
    }
    out.push_back({text.substr(start, i - start), start});
  }
  return out;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_digit);
}

int number(std::string_view digits) {
  return static_cast<int>(parse_integer(std::string(digits)).value_or(0));
}

constexpr int kFirstYear = 2015;
constexpr int kLastYear = 2035;
constexpr int kMidYear = 7;  // a year alone reads as its July

// A year (2015-2035), with its month where "YYYY-MM" follows.
std::optional<YearMonth> year_in(std::string_view text) {
  const std::vector<Token> t = tokens(text);
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].text.size() != 4 || !all_digits(t[i].text)) {
      continue;
    }
    const int year = number(t[i].text);
    if (year < kFirstYear || year > kLastYear) {
      continue;
    }
    int month = kMidYear;
    const size_t end = t[i].at + 4;
    if (i + 1 < t.size() && t[i + 1].at == end + 1 && text[end] == '-' &&
        t[i + 1].text.size() == 2 && all_digits(t[i + 1].text) && number(t[i + 1].text) >= 1 &&
        number(t[i + 1].text) <= 12) {
      month = number(t[i + 1].text);
    }
    return YearMonth{year, month};
  }
  return std::nullopt;
}

// An NGC container version "YY.MM" (NeMo 24.07, 25.04.rc2, 24.03.01.framework).
std::optional<YearMonth> container_version_in(std::string_view text) {
  const std::vector<Token> t = tokens(text);
  for (size_t i = 0; i + 1 < t.size(); ++i) {
    const size_t end = t[i].at + t[i].text.size();
    if (t[i].text.size() == 2 && all_digits(t[i].text) && t[i + 1].at == end + 1 &&
        text[end] == '.' && t[i + 1].text.size() == 2 && all_digits(t[i + 1].text) &&
        (i == 0 || t[i].at == 0 || text[t[i].at - 1] != '.')) {
      const int year = 2000 + number(t[i].text);
      const int month = number(t[i + 1].text);
      if (year >= kFirstYear && year <= kLastYear && month >= 1 && month <= 12) {
        return YearMonth{year, month};
      }
    }
  }
  return std::nullopt;
}

// "arXiv:2104.04473" -> 2021-04.
std::optional<YearMonth> arxiv_in(std::string_view text) {
  size_t at = 0;
  while ((at = text.find("arXiv:", at)) != std::string_view::npos) {
    at += 6;
    const std::string_view id = text.substr(at, 4);
    if (id.size() == 4 && all_digits(id) && at + 4 < text.size() && text[at + 4] == '.') {
      const int year = 2000 + number(id.substr(0, 2));
      const int month = number(id.substr(2, 2));
      if (year >= kFirstYear && year <= kLastYear && month >= 1 && month <= 12) {
        return YearMonth{year, month};
      }
    }
  }
  return std::nullopt;
}

bool in_window(const std::optional<RunDate>& date, const std::optional<YearMonth>& from,
               const std::optional<YearMonth>& until) {
  if (!from && !until) {
    return true;
  }
  return date && (!from || date->when >= *from) && (!until || date->when <= *until);
}

// No model parallelism: ZeRO-3 stated, TP and PP stated 1, or DP stated as all the devices.
bool data_parallel_only(const PublishedRun& r) {
  const PublishedRun::Parallelism& p = r.parallelism;
  return p.zero_stage == 3 || (p.tp == 1 && p.pp == 1) || (p.dp && p.dp == r.devices);
}

const FrameworkFact& framework_of(const PublishedRun& r, const PublishedFacts& facts,
                                  const std::optional<RunDate>& date) {
  for (const FrameworkFact& f : facts.frameworks) {
    const auto in_text = [&](const std::string& n) { return icontains(r.framework, n); };
    const bool named = std::any_of(f.names.begin(), f.names.end(), in_text) &&
                       std::none_of(f.except_names.begin(), f.except_names.end(), in_text);
    if (named && in_window(date, f.from, f.until) &&
        (!f.data_parallel_only || data_parallel_only(r))) {
      return f;
    }
  }
  throw Unmappable(fmt::format("framework \"{}\" not recognised", r.framework));
}

// Whether `words` holds `run` as consecutive words.
bool has_run(const std::vector<std::string>& words, const std::vector<std::string>& run) {
  return std::search(words.begin(), words.end(), run.begin(), run.end()) != words.end();
}

bool notes_say_moe(const PublishedRun& r, const PublishedFacts& facts) {
  return std::any_of(facts.moe_notes.begin(), facts.moe_notes.end(),
                     [&](const std::string& t) { return contains(r.model.arch_notes, t); });
}

void resolve_model(RunFacts& rf) {
  const PublishedRun& r = rf.run;
  const std::vector<std::string> words = name_words(r.model.name);
  const bool moe = r.model.moe || notes_say_moe(r, rf.facts);
  for (const ModelFact& m : rf.facts.models) {
    const bool named = std::any_of(m.names.begin(), m.names.end(),
                                   [&](const auto& run) { return has_run(words, run); });
    if (named && m.moe == moe) {
      rf.model = &m;
      rf.architecture = m.architecture;
      return;
    }
  }
  if (moe) {
    throw Unmappable(
        "a mixture of experts or MLA other than those run_facts.json describes (DeepSeek-V3, "
        "Mixtral, Qwen3's MoE): its shape (shared experts, dense layers, latent ranks) is not in "
        "the record");
  }
  for (const ArchitectureNote& a : rf.facts.architecture_from_notes) {
    if (contains(r.model.arch_notes, a.text)) {
      rf.architecture = a.architecture;
      rf.architecture_basis = a.source;
      return;
    }
  }
  if (!rf.facts.default_model) {
    throw Unmappable(fmt::format("model family of \"{}\" not recognised", r.model.name));
  }
  rf.model = &rf.facts.models[*rf.facts.default_model];
  rf.architecture = rf.model->architecture;
  rf.architecture_basis = fmt::format(
      "\"{}\" names no model family run_facts.json knows: its stated shape costed as the {} "
      "entry's architecture",
      r.model.name, rf.model->id);
}

bool matches(const SourceFact::Match& m, const RunFacts& rf) {
  const PublishedRun& r = rf.run;
  const auto same = [](const std::optional<int64_t>& want, const std::optional<int64_t>& have) {
    return !want || want == have;
  };
  const PublishedRun::Parallelism& p = r.parallelism;
  return (m.citation_prefix.empty() || r.citation.starts_with(m.citation_prefix)) &&
         (m.location_contains.empty() || contains(r.location, m.location_contains)) &&
         (m.model_names.empty() || std::find(m.model_names.begin(), m.model_names.end(),
                                             r.model.name) != m.model_names.end()) &&
         (m.model_name_prefix.empty() || r.model.name.starts_with(m.model_name_prefix)) &&
         (m.framework.empty() || m.framework == rf.framework->id) &&
         (m.framework_text.empty() || icontains(r.framework, m.framework_text)) &&
         (m.model.empty() || (rf.model != nullptr && m.model == rf.model->id)) &&
         (m.hardware_key.empty() || m.hardware_key == r.hardware_key) &&
         (m.precision_class.empty() || m.precision_class == r.precision_class) &&
         in_window(rf.date, m.from, m.until) && same(m.layers, r.model.layers) &&
         same(m.tp, p.tp) && same(m.pp, p.pp) && same(m.cp, p.cp) && same(m.vpp, p.vpp) &&
         same(m.devices, r.devices) && (!m.fsdp || m.fsdp == p.fsdp);
}

}  // namespace

int64_t stated(const std::optional<int64_t>& v, const char* what) {
  if (!v) {
    throw Unmappable(fmt::format("{} is not stated", what));
  }
  return *v;
}

bool contains(std::string_view text, std::string_view word) {
  return text.find(word) != std::string_view::npos;
}

bool icontains(std::string_view text, std::string_view word) {
  const auto lower = [](char c) { return std::tolower(static_cast<unsigned char>(c)); };
  return std::search(text.begin(), text.end(), word.begin(), word.end(), [&](char a, char b) {
           return lower(a) == lower(b);
         }) != text.end();
}

std::optional<RunDate> run_date(const PublishedRun& r) {
  if (const auto y = year_in(r.framework)) {
    return RunDate{*y, "a year in the framework text"};
  }
  if (const auto v = container_version_in(r.framework)) {
    return RunDate{*v, "the container version in the framework text"};
  }
  if (const auto a = arxiv_in(r.citation)) {
    return RunDate{*a, "the arXiv id in the citation"};
  }
  if (const auto y = year_in(r.citation)) {
    return RunDate{*y, "a date in the citation"};
  }
  return std::nullopt;
}

bool RunFacts::unstated_in_source(UnstatedField field) const {
  const PublishedRun::Parallelism& p = run.parallelism;
  return std::any_of(facts.unstated_notes.begin(), facts.unstated_notes.end(),
                     [&](const UnstatedNote& u) {
                       return u.field == field && contains(p.notes, u.text) &&
                              (!u.when_pipelined || p.pp.value_or(1) > 1);
                     });
}

RunFacts resolve_run(const PublishedRun& r, const PublishedFacts& facts) {
  RunFacts rf{r, facts, run_date(r), nullptr, nullptr, ModelArchitecture::kGpt, {}, {}};
  resolve_model(rf);
  rf.framework = &framework_of(r, facts, rf.date);
  for (const SourceFact& f : facts.source_facts) {
    if (matches(f.match, rf)) {
      rf.source_facts.push_back(&f);
    }
  }
  return rf;
}

}  // namespace meshsim::validation::detail
