// Origins of input values and the typed field errors the edge locates (sim/provenance.h).
#include "meshsim/sim/provenance.h"

#include <gtest/gtest.h>

namespace meshsim {
namespace {

enum class Knob : uint8_t { kSpeed, kDepth };
constexpr auto enum_names(Knob) {
  return std::to_array<EnumName<Knob>>({{Knob::kSpeed, "speed"}, {Knob::kDepth, "depth"}});
}

TEST(Origin, DescribesEachKind) {
  EXPECT_EQ(Origin().describe(), "the default");
  EXPECT_FALSE(Origin().given());
  EXPECT_EQ(Origin::preset("the default scenario").describe(), "the default scenario");
  EXPECT_FALSE(Origin::preset("x").given());
  EXPECT_EQ(Origin::flag("--speed").describe(), "--speed");
  EXPECT_TRUE(Origin::flag("--speed").given());
  EXPECT_EQ(Origin::file("run.json", "/knobs/speed").describe(), "run.json: /knobs/speed");
  EXPECT_TRUE(Origin::file("run.json", "/speed").given());
}

TEST(Origin, ErrorsAreLocated) {
  const InputError file = Origin::file("run.json", "/speed").error("too fast");
  EXPECT_EQ(file.source(), "run.json");
  EXPECT_EQ(file.location(), "/speed");
  EXPECT_STREQ(file.what(), "run.json: /speed: too fast");
  EXPECT_STREQ(Origin::flag("--speed").error("too fast").what(), "--speed: too fast");
}

TEST(Provenance, LocatesAFieldErrorWhereTheValueCameFrom) {
  Provenance<Knob> p;
  EXPECT_EQ(p[Knob::kDepth].kind(), Origin::Kind::kDefault);
  p.set_all(Origin::preset("factory"));
  p.set(Knob::kSpeed, Origin::file("run.json", "/speed"));
  const FieldError<Knob> speed(Knob::kSpeed, "expected at most 3, got 9");
  EXPECT_STREQ(speed.what(), "speed: expected at most 3, got 9");  // unlocated: the field's name
  EXPECT_STREQ(p.locate(speed).what(), "run.json: /speed: expected at most 3, got 9");
  EXPECT_STREQ(p.locate(FieldError<Knob>(Knob::kDepth, "negative")).what(), "factory: negative");
}

}  // namespace
}  // namespace meshsim
