// The one enum <-> string mechanism (sim/enum_names.h): canonical names, aliases, unknown names.
#include "meshsim/sim/enum_names.h"

#include <gtest/gtest.h>

#include "meshsim/sim/json_input.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/program.h"

namespace meshsim {
namespace {

enum class Colour { kRed, kGreen, kBlue };
constexpr auto enum_names(Colour) {
  return std::to_array<EnumName<Colour>>({{Colour::kRed, "red"},
                                          {Colour::kGreen, "green"},
                                          {Colour::kBlue, "blue"},
                                          {Colour::kGreen, "verde"}});
}

TEST(EnumNames, CanonicalNamesAndAliases) {
  EXPECT_EQ(to_string(Colour::kGreen), "green");  // the first entry, never the alias
  EXPECT_EQ(parse_enum<Colour>("verde"), Colour::kGreen);
  EXPECT_EQ(parse_enum<Colour>("blue"), Colour::kBlue);
  EXPECT_EQ(enum_choices<Colour>(), (std::vector<std::string>{"red", "green", "blue"}));
  EXPECT_EQ(enum_values<Colour>(),
            (std::vector<Colour>{Colour::kRed, Colour::kGreen, Colour::kBlue}));
  EXPECT_EQ(describe_choices<Colour>(), "red, green (verde), blue");
  EXPECT_EQ(enum_spellings<Colour>(), (std::vector<std::string>{"red", "green", "blue", "verde"}));
}

TEST(EnumNames, UnknownNamesAreNotGuessed) {
  EXPECT_FALSE(parse_enum<Colour>("Red").has_value());
  EXPECT_FALSE(parse_enum<Colour>("").has_value());
  EXPECT_FALSE(parse_enum<Colour>("re").has_value());
}

// Every enumerator of the engine's enums has a name, and the name parses back.
TEST(EnumNames, EngineTablesRoundTrip) {
  for (int c = 0; c < kNumOpClasses; ++c) {
    const auto v = static_cast<OpClass>(c);
    EXPECT_EQ(parse_enum<OpClass>(to_string(v)), v) << c;
  }
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    const auto v = static_cast<MemoryCategory>(c);
    EXPECT_EQ(parse_enum<MemoryCategory>(to_string(v)), v) << c;
  }
  EXPECT_EQ(to_string(CollectiveKind::kReduceScatter), "reduce-scatter");
  EXPECT_EQ(to_string(OpKind::kRecv), "recv");
}

TEST(EnumNames, JsonChoiceNamesFieldAndChoices) {
  const nlohmann::json doc = {{"colour", "purple"}, {"other", "verde"}};
  JsonObject o(doc, "paint.json");
  EXPECT_EQ(o.choice<Colour>("other"), Colour::kGreen);
  try {
    (void)o.choice<Colour>("colour");
    FAIL() << "purple was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.source(), "paint.json");
    EXPECT_EQ(e.location(), "/colour");
    EXPECT_NE(e.message().find("\"purple\" is not one of: red, green (verde), blue"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace meshsim
