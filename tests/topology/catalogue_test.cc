#include <gtest/gtest.h>

#include <cmath>

#include <string>
#include <vector>

#include "meshsim/sim/error.h"
#include "meshsim/topology/chip.h"
#include "meshsim/topology/roofline.h"
#include "test_files.h"

namespace meshsim::topology {
namespace {

using testing::capture_input_error;
using testing::expect_error;
using testing::read_source_json;
using testing::write_temp;

const std::vector<std::string> kChips = {
    "a100-40gb", "a100-80gb", "a800-80gb", "b200",    "gb200",   "h100-sxm", "h100-sxm-96gb-hbm2e",
    "h200",      "h800-sxm",  "tpu-v3",    "tpu-v4",  "tpu-v5e", "tpu-v5p",  "tpu-v6e"};

// The sourced fields every chip of a kind must have (JSON pointers inside the chip entry). Every
// chip carries the kernel-class model (issue 11): GEMM shape terms, attention by implementation;
// GPUs the SMs collectives hold; the per-class memory efficiencies and the FP8 GEMM efficiency
// where the catalogue gives them.
std::vector<std::string> required_fields(const Chip& chip) {
  std::vector<std::string> f = {"/hbm/capacity", "/hbm/bandwidth", "/efficiency/matmul",
                                "/efficiency/memory", "/efficiency/launch_overhead",
                                "/efficiency/attention"};
  for (const char* p : {"tile_m", "tile_n", "units", "k_half", "call_overhead", "batched"}) {
    f.push_back(std::string("/efficiency/matmul_shape/") + p);
  }
  for (const auto& [dtype, rate] : chip.peaks) {
    f.push_back("/peak/" + std::string(to_string(dtype)));
  }
  for (size_t c = 0; c < chip.efficiency.memory_by_class.size(); ++c) {
    if (chip.efficiency.memory_by_class[c]) {
      f.push_back("/efficiency/memory_by_class/" +
                  std::string(to_string(static_cast<OpClass>(c))));
    }
  }
  if (chip.efficiency.matmul_shape && chip.efficiency.matmul_shape->split_k_min > 0) {
    f.emplace_back("/efficiency/matmul_shape/split_k_min");
  }
  if (chip.efficiency.matmul_fp8) {
    f.emplace_back("/efficiency/matmul_fp8");
  }
  if (chip.efficiency.matmul_fp8_fast_accum_speedup) {
    f.emplace_back("/efficiency/matmul_fp8_fast_accum_speedup");
  }
  if (chip.kind == ChipKind::kGpu) {
    for (const char* p : {"/nvlink/generation", "/nvlink/links", "/nvlink/link_bandwidth",
                          "/nvlink/efficiency", "/nic/bandwidth", "/nic/efficiency",
                          "/gpu/sm_count", "/gpu/max_threads_per_sm", "/gpu/smem_per_sm",
                          "/gpu/max_blocks_per_sm", "/efficiency/matmul_shape/alternative_tiles",
                          "/efficiency/comm_units"}) {
      f.emplace_back(p);
    }
    if (chip.nvlink->nvls_efficiency) {
      f.emplace_back("/nvlink/nvls_efficiency");
    }
    if (chip.gpu->boost_clock_hz) {
      f.emplace_back("/gpu/boost_clock");
    }
    f.emplace_back("/gpu/architecture");  // every builtin GPU: frameworks key kernels on it
    f.emplace_back("/host_link/to_device");  // every builtin GPU: activation offloading
    f.emplace_back("/host_link/to_host");
  } else {
    for (const char* p :
         {"/ici/links", "/ici/link_bandwidth", "/ici/torus_dims", "/ici/chips_per_host",
          "/ici/efficiency", "/dcn/bandwidth", "/dcn/efficiency", "/tpu/mxu_count",
          "/tpu/mxu_rows", "/tpu/mxu_cols", "/tpu/clock"}) {
      f.emplace_back(p);
    }
    if (chip.ici->torus_dims == 2) {
      f.emplace_back("/ici/pod_edge");
    }
  }
  if (chip.sources.contains("/variant_of")) {  // an export variant names its base and why
    f.emplace_back("/variant_of");
  }
  return f;
}

// Issue 12: the achieved fractions of each link's line rate live beside the line rate.
TEST(Catalogue, LinkEfficienciesBesideTheLineRates) {
  const Catalogue cat = Catalogue::builtin();
  const Chip& h100 = cat.chip("h100-sxm");
  EXPECT_DOUBLE_EQ(h100.nvlink->efficiency, 0.824);  // NCCL SM90_NVLINK_BW 20.6 of 25 GB/s
  EXPECT_DOUBLE_EQ(*h100.nvlink->nvls_efficiency, 0.85);
  EXPECT_DOUBLE_EQ(h100.nic_efficiency, 0.96);
  EXPECT_FALSE(cat.chip("a100-80gb").nvlink->nvls_efficiency);  // no NVLink SHARP on A100
  EXPECT_DOUBLE_EQ(*cat.chip("gb200").nvlink->nvls_efficiency, 0.74);
  EXPECT_DOUBLE_EQ(cat.chip("tpu-v5p").ici->efficiency, 0.82);
  EXPECT_DOUBLE_EQ(cat.chip("tpu-v5p").dcn_efficiency, 1.0);
}

TEST(Catalogue, BuiltinHasEveryChip) { EXPECT_EQ(Catalogue::builtin().names(), kChips); }

// Export variants are their base chip with what differs restated: H800 and A800 the H100's and
// A100's with 8 NVLink links (400 GB/s bidirectional); the Grand Teton H100 its HBM2e and its peak
// an upper bound that says so. Every other figure, and its source, is the base's.
TEST(Catalogue, VariantsAreTheirBaseWithWhatDiffers) {
  const Catalogue cat = Catalogue::builtin();
  const Chip& h100 = cat.chip("h100-sxm");
  const Chip& h800 = cat.chip("h800-sxm");
  EXPECT_EQ(h800.nvlink->links, 8);
  EXPECT_EQ(h100.nvlink->links, 18);
  EXPECT_EQ(h800.nvlink->link_bandwidth, h100.nvlink->link_bandwidth);
  EXPECT_EQ(h800.peak(Dtype::kBf16), h100.peak(Dtype::kBf16));
  EXPECT_EQ(h800.hbm_bandwidth, h100.hbm_bandwidth);
  EXPECT_EQ(h800.efficiency.matmul, h100.efficiency.matmul);
  EXPECT_EQ(h800.source_of("/peak/bf16"), h100.source_of("/peak/bf16"));
  EXPECT_NE(h800.source_of("/nvlink/links"), h100.source_of("/nvlink/links"));
  EXPECT_NE(h800.source_of("/variant_of").find("h100-sxm"), std::string::npos);
  EXPECT_EQ(cat.chip("a800-80gb").nvlink->links, 8);
  EXPECT_EQ(cat.chip("a800-80gb").peak(Dtype::kBf16), cat.chip("a100-80gb").peak(Dtype::kBf16));
  const Chip& teton = cat.chip("h100-sxm-96gb-hbm2e");
  EXPECT_EQ(teton.hbm_bandwidth, TBps(2.4));
  EXPECT_EQ(teton.hbm_capacity, GB(96));
  // Its peak: the H100 die's datasheet peaks at 700 W (SXM5, 989.4) and 400 W (NVL, 835.5)
  // interpolated by power to its 500 W, inside the bound torchtitan's benchmark states.
  const double sxm = h100.peak(Dtype::kBf16)->value();
  const double nvl = 835.5e12;
  const double at_500w = sxm * std::pow(500.0 / 700.0, std::log(nvl / sxm) / std::log(400.0 / 700.0));
  EXPECT_NEAR(teton.peak(Dtype::kBf16)->value(), at_500w, 0.1e12);
  EXPECT_GT(teton.peak(Dtype::kBf16)->value(), nvl);
  EXPECT_LT(teton.peak(Dtype::kBf16)->value(), sxm);
  EXPECT_NEAR(teton.peak(Dtype::kFp8)->value() / h100.peak(Dtype::kFp8)->value(), at_500w / sxm, 1e-4);
}

TEST(CatalogueErrors, VariantOfAnUnknownChipOrOfAVariant) {
  nlohmann::json doc = read_source_json("topology/chips.json");
  nlohmann::json bad = doc;
  bad["chips"]["h800-sxm"]["variant_of"]["chip"] = "h99";
  expect_error(capture_input_error([&] { Catalogue::parse(bad, "c.json"); }), "c.json",
               "/chips/h800-sxm", "\"h99\" is not a chip of this catalogue");
  bad = doc;
  bad["chips"]["a800-80gb"]["variant_of"]["chip"] = "h800-sxm";
  expect_error(capture_input_error([&] { Catalogue::parse(bad, "c.json"); }), "c.json",
               "/chips/a800-80gb", "not itself a variant");
  bad = doc;  // a variant's own figures are checked like any chip's
  bad["chips"]["h800-sxm"]["nvlink"]["links"]["value"] = -8;
  expect_error(capture_input_error([&] { Catalogue::parse(bad, "c.json"); }), "c.json",
               "/chips/h800-sxm/nvlink/links/value", "");
}

TEST(Catalogue, EveryFigureIsPositiveAndSourced) {
  const Catalogue cat = Catalogue::builtin();
  for (const std::string& name : kChips) {
    SCOPED_TRACE(name);
    const Chip& chip = cat.chip(name);
    ASSERT_TRUE(chip.peak(Dtype::kBf16).has_value());
    for (const auto& [dtype, rate] : chip.peaks) {
      EXPECT_GT(rate.value(), 0.0);
    }
    EXPECT_GT(chip.hbm_capacity.count(), 0);
    EXPECT_GT(chip.hbm_bandwidth.value(), 0.0);
    EXPECT_GT(chip.efficiency.matmul, 0.0);
    EXPECT_LE(chip.efficiency.matmul, 1.0);
    EXPECT_GT(chip.efficiency.memory, 0.0);
    EXPECT_LE(chip.efficiency.memory, 1.0);
    EXPECT_GT(chip.efficiency.launch_overhead.ps(), 0);
    if (chip.kind == ChipKind::kGpu) {
      ASSERT_TRUE(chip.nvlink && chip.nic_bandwidth && chip.gpu);
      EXPECT_FALSE(chip.ici || chip.dcn_bandwidth || chip.tpu);
      EXPECT_GT(chip.nvlink->total_bandwidth().value(), 0.0);
      EXPECT_GT(chip.nic_bandwidth->value(), 0.0);
      EXPECT_GT(chip.gpu->sm_count, 0);
      ASSERT_TRUE(chip.host_link);
      EXPECT_GT(chip.host_link->to_device.value(), 0.0);
      EXPECT_GT(chip.host_link->to_host.value(), 0.0);
    } else {
      ASSERT_TRUE(chip.ici && chip.dcn_bandwidth && chip.tpu);
      EXPECT_FALSE(chip.nvlink || chip.nic_bandwidth || chip.gpu);
      EXPECT_GT(chip.ici->total_bandwidth().value(), 0.0);
      EXPECT_GT(chip.dcn_bandwidth->value(), 0.0);
    }
    const std::vector<std::string> fields = required_fields(chip);
    for (const std::string& field : fields) {
      EXPECT_FALSE(chip.source_of(field).empty()) << field << " has no source";
    }
    EXPECT_EQ(chip.sources.size(), fields.size()) << "a sourced field is not checked here";
  }
}

TEST(Catalogue, EmbeddedCopyMatchesTheSourceFile) {
  const Catalogue builtin = Catalogue::builtin();
  const Catalogue file = Catalogue::load(testing::source_path("topology/chips.json"));
  ASSERT_EQ(file.names(), builtin.names());
  for (const std::string& name : kChips) {
    EXPECT_EQ(file.chip(name).sources, builtin.chip(name).sources) << name;
  }
}

TEST(Catalogue, KnownGpuValues) {
  const Catalogue cat = Catalogue::builtin();
  const Chip& h100 = cat.chip("h100-sxm");
  EXPECT_NEAR(h100.peak(Dtype::kBf16)->tflops(), 989.4, 1.0);
  EXPECT_NEAR(h100.peak(Dtype::kFp8)->tflops(), 1978.9, 1.0);
  EXPECT_NEAR(h100.peak(Dtype::kTf32)->tflops(), 494.7, 1.0);
  EXPECT_NEAR(h100.peak(Dtype::kFp32)->tflops(), 66.9, 0.5);
  EXPECT_DOUBLE_EQ(h100.hbm_bandwidth.value(), 3.35e12);
  EXPECT_EQ(h100.hbm_capacity, MiB(81559));
  EXPECT_EQ(h100.nvlink->links, 18);
  EXPECT_DOUBLE_EQ(h100.nvlink->total_bandwidth().value(), 450e9);  // per direction
  EXPECT_DOUBLE_EQ(h100.nic_bandwidth->value(), Gbps(400).value());
  EXPECT_EQ(h100.gpu->sm_count, 132);

  const Chip& a100 = cat.chip("a100-80gb");
  EXPECT_DOUBLE_EQ(a100.peak(Dtype::kBf16)->tflops(), 312.0);
  EXPECT_DOUBLE_EQ(a100.nvlink->total_bandwidth().value(), 300e9);
  EXPECT_DOUBLE_EQ(a100.nic_bandwidth->value(), Gbps(200).value());
  EXPECT_EQ(a100.gpu->smem_per_sm, KiB(164));

  // A device reading (39.586 GiB), not the datasheet's 40 GB read as 1e9 bytes.
  EXPECT_EQ(cat.chip("a100-40gb").hbm_capacity, MiB(40536));

  const Chip& h200 = cat.chip("h200");
  EXPECT_DOUBLE_EQ(h200.hbm_bandwidth.value(), 4.8e12);
  EXPECT_NEAR(h200.peak(Dtype::kBf16)->tflops(), 989.4, 1.0);

  const Chip& b200 = cat.chip("b200");
  EXPECT_DOUBLE_EQ(b200.peak(Dtype::kBf16)->tflops(), 2250.0);
  EXPECT_DOUBLE_EQ(b200.nvlink->total_bandwidth().value(), 900e9);
  EXPECT_EQ(b200.gpu->sm_count, 148);
}

TEST(Catalogue, KnownTpuValues) {
  const Catalogue cat = Catalogue::builtin();
  const Chip& v5e = cat.chip("tpu-v5e");
  EXPECT_DOUBLE_EQ(v5e.peak(Dtype::kBf16)->tflops(), 197.0);
  EXPECT_DOUBLE_EQ(v5e.hbm_bandwidth.value(), 819e9);
  EXPECT_EQ(v5e.hbm_capacity, GiB(16));
  EXPECT_EQ(v5e.ici->torus_dims, 2);
  EXPECT_EQ(v5e.ici->links, 4);
  EXPECT_DOUBLE_EQ(v5e.ici->link_bandwidth.value(), 45e9);  // the scaling book's ICI table

  const Chip& v5p = cat.chip("tpu-v5p");
  EXPECT_DOUBLE_EQ(v5p.peak(Dtype::kBf16)->tflops(), 459.0);
  EXPECT_EQ(v5p.ici->torus_dims, 3);
  EXPECT_DOUBLE_EQ(v5p.ici->total_bandwidth().value(), 540e9);  // 6 links x 9e10 one-way
  EXPECT_DOUBLE_EQ(v5p.dcn_bandwidth->value(), Gbps(50).value());

  EXPECT_EQ(cat.chip("tpu-v4").ici->torus_dims, 3);
  EXPECT_FALSE(cat.chip("tpu-v4").ici->pod_edge.has_value());  // 3D: sized by cubes
  EXPECT_EQ(cat.chip("tpu-v6e").tpu->mxu_rows, 256);
  // The runtime's bytes_limit on a v6e (vLLM pull request #16211): Google's "32 GB" are GiB.
  EXPECT_EQ(cat.chip("tpu-v6e").hbm_capacity, MiB(31996));
  EXPECT_EQ(cat.chip("tpu-v6e").ici->pod_edge, 16);

  // TPU v3: 123 TFLOP/s from 4 MXUs of 128x128 (2 TensorCores x 2), a 32x32 2D torus pod of
  // 4-link chips at 100 GB/s per link one-way, 4 chips per host.
  const Chip& v3 = cat.chip("tpu-v3");
  EXPECT_DOUBLE_EQ(v3.peak(Dtype::kBf16)->tflops(), 123.0);
  EXPECT_FALSE(v3.peak(Dtype::kFp8).has_value());
  EXPECT_EQ(v3.hbm_capacity, GiB(32));
  EXPECT_DOUBLE_EQ(v3.hbm_bandwidth.value(), 900e9);
  EXPECT_EQ(v3.tpu->mxu_count, 4);
  EXPECT_EQ(v3.tpu->mxu_rows, 128);
  EXPECT_EQ(v3.efficiency.matmul_shape->units, 4);
  EXPECT_EQ(v3.ici->torus_dims, 2);
  EXPECT_EQ(v3.ici->links, 4);
  EXPECT_DOUBLE_EQ(v3.ici->link_bandwidth.value(), 100e9);
  EXPECT_EQ(v3.ici->chips_per_host, 4);
  EXPECT_EQ(v3.ici->pod_edge, 32);
  EXPECT_DOUBLE_EQ(v3.dcn_bandwidth->value(), Gbps(50).value());
}

TEST(Catalogue, MxusAccountForTheTpuPeak) {
  const Catalogue cat = Catalogue::builtin();
  for (const char* name : {"tpu-v3", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e"}) {
    const Chip& c = cat.chip(name);
    const double derived =
        systolic_peak(c.tpu->mxu_rows, c.tpu->mxu_cols, c.tpu->clock_hz).value() *
        static_cast<double>(c.tpu->mxu_count);
    EXPECT_NEAR(derived / c.peak(Dtype::kBf16)->value(), 1.0, 0.01) << name;
  }
}

TEST(Catalogue, MissingDtypesAreAbsentNotZero) {
  const Catalogue cat = Catalogue::builtin();
  EXPECT_FALSE(cat.chip("a100-80gb").peak(Dtype::kFp8).has_value());  // Ampere has no fp8
  EXPECT_TRUE(cat.chip("h100-sxm").peak(Dtype::kFp8).has_value());
  EXPECT_TRUE(cat.chip("b200").peak(Dtype::kFp8).has_value());
  EXPECT_FALSE(cat.chip("tpu-v5e").peak(Dtype::kFp8).has_value());  // int8 is not fp8
  EXPECT_FALSE(cat.chip("tpu-v6e").peak(Dtype::kFp8).has_value());
  EXPECT_FALSE(cat.chip("tpu-v3").peak(Dtype::kFp8).has_value());
  EXPECT_FALSE(cat.chip("tpu-v4").peak(Dtype::kFp32).has_value());
}

TEST(Catalogue, RooflineFromCatalogue) {
  const Catalogue cat = Catalogue::builtin();
  const Chip& h100 = cat.chip("h100-sxm");
  EXPECT_NEAR(ridge_point(*h100.peak(Dtype::kBf16), h100.hbm_bandwidth), 295.34, 0.01);
  const Chip& v5e = cat.chip("tpu-v5e");
  EXPECT_NEAR(ridge_point(*v5e.peak(Dtype::kBf16), v5e.hbm_bandwidth), 240.54, 0.01);
  // Workbook 8.3 on the catalogue's H100 SM limits.
  EXPECT_DOUBLE_EQ(occupancy({128, KiB(48)}, h100.gpu->sm_limits()), 0.25);
}

TEST(Catalogue, DtypeNames) {
  for (const Dtype d : all_dtypes()) {
    EXPECT_EQ(parse_enum<Dtype>(to_string(d)), d);
  }
  EXPECT_FALSE(parse_enum<Dtype>("int8").has_value());
  EXPECT_FALSE(parse_enum<Dtype>("BF16").has_value());
}

TEST(Catalogue, UnknownChipListsKnownOnes) {
  const Catalogue cat = Catalogue::builtin();
  const InputError e = capture_input_error([&] { cat.chip("h900"); });
  EXPECT_NE(e.message().find("unknown chip \"h900\""), std::string::npos) << e.what();
  EXPECT_NE(e.message().find("h100-sxm"), std::string::npos) << e.what();
  EXPECT_NE(e.message().find("tpu-v5p"), std::string::npos) << e.what();
}

// A catalogue with one chip, taken from the shipped file and then broken by `mutate`.
InputError load_broken(const std::string& file, const std::string& chip,
                       const std::function<void(nlohmann::json&)>& mutate, std::string* path) {
  nlohmann::json doc = read_source_json("topology/chips.json");
  nlohmann::json entry = doc["chips"][chip];
  doc["chips"] = nlohmann::json::object({{chip, entry}});
  mutate(doc["chips"][chip]);
  *path = write_temp(file, doc);
  return capture_input_error([&] { Catalogue::load(*path); });
}

TEST(CatalogueErrors, EachClassOfBadInputIsNamed) {
  struct Case {
    std::string chip;
    std::function<void(nlohmann::json&)> mutate;
    std::string pointer;
    std::string expectation;
  };
  const std::vector<Case> cases = {
      {"h100-sxm", [](auto& c) { c["bogus"] = 1; }, "/chips/h100-sxm/bogus", "unknown field"},
      {"h100-sxm", [](auto& c) { c["peak"]["bf16"].erase("source"); },
       "/chips/h100-sxm/peak/bf16/source", "required field is missing"},
      {"h100-sxm", [](auto& c) { c["hbm"]["bandwidth"]["source"] = " "; },
       "/chips/h100-sxm/hbm/bandwidth/source", "expected a non-empty citation"},
      {"h100-sxm", [](auto& c) { c["hbm"]["bandwidth"]["value"] = "0TB/s"; },
       "/chips/h100-sxm/hbm/bandwidth/value", "expected a positive bandwidth"},
      {"h100-sxm", [](auto& c) { c["nic"]["bandwidth"]["value"] = "400Gbsp"; },
       "/chips/h100-sxm/nic/bandwidth/value", "unknown unit \"Gbsp\""},
      {"h100-sxm", [](auto& c) { c["gpu"]["sm_count"]["value"] = "132"; },
       "/chips/h100-sxm/gpu/sm_count/value", "expected an integer"},
      {"h100-sxm", [](auto& c) { c["peak"]["int8"] = c["peak"]["fp8"]; },
       "/chips/h100-sxm/peak/int8", "unknown dtype"},
      {"h100-sxm", [](auto& c) { c["peak"].erase("bf16"); }, "/chips/h100-sxm/peak/bf16",
       "needs its dense bf16 peak"},
      {"h100-sxm", [](auto& c) { c["efficiency"]["matmul"]["value"] = 1.2; },
       "/chips/h100-sxm/efficiency/matmul/value", "expected a fraction in (0, 1]"},
      {"h100-sxm", [](auto& c) { c["efficiency"].erase("matmul_fp8"); },
       "/chips/h100-sxm/efficiency/matmul_fp8_fast_accum_speedup", "expected matmul_fp8 beside it"},
      {"h100-sxm",
       [](auto& c) { c["efficiency"]["matmul_fp8_fast_accum_speedup"]["value"] = 1.5; },
       "/chips/h100-sxm/efficiency/matmul_fp8_fast_accum_speedup", "at most 1 (got 0.694 x 1.5)"},
      {"h100-sxm", [](auto& c) { c["ici"] = nlohmann::json::object(); }, "/chips/h100-sxm/ici",
       "not allowed for a gpu chip"},
      {"h100-sxm", [](auto& c) { c["kind"] = "npu"; }, "/chips/h100-sxm/kind", "not one of"},
      {"tpu-v5e", [](auto& c) { c["tpu"]["clock"]["value"] = "1.1GHz"; },
       "/chips/tpu-v5e/tpu/clock", "must agree within 1%"},
      {"tpu-v5e", [](auto& c) { c["tpu"]["clock"]["value"] = "1.5GHertz"; },
       "/chips/tpu-v5e/tpu/clock/value", "unknown frequency unit"},
      {"tpu-v5e", [](auto& c) { c["ici"]["torus_dims"]["value"] = 4; },
       "/chips/tpu-v5e/ici/torus_dims", "expected 2 or 3"},
      {"tpu-v5e", [](auto& c) { c.erase("dcn"); }, "/chips/tpu-v5e/dcn",
       "required field is missing"},
      {"tpu-v3", [](auto& c) { c["ici"].erase("pod_edge"); }, "/chips/tpu-v3/ici/pod_edge",
       "required field is missing"},
      {"tpu-v5p", [](auto& c) { c["ici"]["pod_edge"] = c["ici"]["links"]; },
       "/chips/tpu-v5p/ici/pod_edge", "only a 2D torus"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].pointer);
    std::string path;
    const InputError e = load_broken("bad_chip_" + std::to_string(i) + ".json", cases[i].chip,
                                     cases[i].mutate, &path);
    expect_error(e, path, cases[i].pointer, cases[i].expectation);
  }
}

TEST(CatalogueErrors, FileLevelProblems) {
  const std::string missing = testing::source_path("topology/no_such_catalogue.json");
  expect_error(capture_input_error([&] { Catalogue::load(missing); }), missing, "",
               "cannot open file");
  const std::string broken = write_temp("broken.json", std::string("{\"chips\": {"));
  EXPECT_THROW(Catalogue::load(broken), InputError);
  const std::string empty = write_temp("empty.json", std::string("{\"chips\": {}}"));
  expect_error(capture_input_error([&] { Catalogue::load(empty); }), empty, "/chips",
               "expected at least one chip");
  const std::string bad_name =
      write_temp("bad_name.json", std::string("{\"chips\": {\"H100\": {}}}"));
  expect_error(capture_input_error([&] { Catalogue::load(bad_name); }), bad_name, "/chips/H100",
               "lower-case");
}

}  // namespace
}  // namespace meshsim::topology
