// `meshsim kernel-model SHAPES.csv` (cli/src/kernel_model_command.h): each row is what the
// simulator's own compute model (topology/compute_model.h) gives that GEMM, in-process; --k-half
// replaces the catalogue's; a bad table is exit 2 naming the file, the line and the column.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <tuple>

#include "command_test.h"
#include "csv_rows.h"
#include "meshsim/topology/chip.h"
#include "meshsim/topology/compute_model.h"

namespace meshsim::cli {
namespace {

using meshsim::testing::CommandTest;
using ::testing::HasSubstr;

class KernelModelTest : public CommandTest {};

std::vector<meshsim::testing::CsvRow> parse_csv(const std::string& text) {
  return meshsim::testing::csv_rows(text, "meshsim kernel-model's output");
}

TEST_F(KernelModelTest, EachRowIsTheSimulatorsOwnCost) {
  // A square GEMM, a skinny one that splits its reduction, a batched one, on three chips.
  write_file("s.csv",
             "chip,dtype,m,n,k,batch\n"
             "h100-sxm,bf16,8192,8192,8192,1\n"
             "a100-80gb,bf16,15,15,98304,1\n"
             "h200,fp8,2048,1024,4096,4\n");
  const auto r = meshsim({"kernel-model", path("s.csv").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto rows = parse_csv(r.output);
  ASSERT_EQ(rows.size(), 3u) << r.output;
  const topology::Catalogue cat = topology::Catalogue::builtin();
  const std::vector<std::tuple<std::string, Dtype, MatmulShape>> expect = {
      {"h100-sxm", Dtype::kBf16, {8192, 8192, 8192, 1}},
      {"a100-80gb", Dtype::kBf16, {15, 98304, 15, 1}},
      {"h200", Dtype::kFp8, {2048, 4096, 1024, 4}}};
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& [chip, dtype, shape] = expect[i];
    const topology::RooflineComputeModel model(cat.chip(chip));
    const ComputeWork w = matmul_work(shape, dtype, 2);
    EXPECT_NEAR(std::stod(rows[i].at("time_s")), model.kernel_time(w).total().seconds(),
                1e-8 * model.kernel_time(w).total().seconds())
        << chip;
    EXPECT_NEAR(std::stod(rows[i].at("efficiency")), model.flop_efficiency(w), 1e-8) << chip;
    const topology::GemmTiling t =
        topology::gemm_tiling(*model.chip().efficiency.matmul_shape, shape);
    EXPECT_EQ(std::stoll(rows[i].at("slices")), t.slices) << chip;
    EXPECT_NEAR(std::stod(rows[i].at("tile_factor")), t.rate, 1e-8) << chip;
  }
  // The skinny reduction is split over the SMs its one output tile leaves idle.
  EXPECT_GT(std::stoll(rows[1].at("slices")), 1);
}

TEST_F(KernelModelTest, KHalfReplacesTheCatalogues) {
  write_file("s.csv", "chip,dtype,m,n,k\nh200,bf16,4096,4096,1024\n");
  const auto base = parse_csv(meshsim({"kernel-model", path("s.csv").string()}).output);
  const auto r = meshsim({"kernel-model", path("s.csv").string(), "--k-half", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto zero = parse_csv(r.output);
  ASSERT_EQ(base.size(), 1u);
  ASSERT_EQ(zero.size(), 1u);
  // With k_half 0 the factor is the tile quantization alone; the catalogue's k_half lowers it.
  EXPECT_DOUBLE_EQ(std::stod(zero[0].at("tile_factor")), std::stod(zero[0].at("quantization")));
  EXPECT_LT(std::stod(base[0].at("tile_factor")), std::stod(zero[0].at("tile_factor")));
}

TEST_F(KernelModelTest, BadTablesExitTwoNamingTheLineAndColumn) {
  write_file("nohead.csv", "chip,dtype,m,n\nh200,bf16,1,2\n");
  meshsim::testing::expect_input_error(meshsim({"kernel-model", path("nohead.csv").string()}),
                                       {"nohead.csv", "no column \"k\""});
  write_file("dim.csv", "chip,dtype,m,n,k\nh200,bf16,4096,0,4096\n");
  meshsim::testing::expect_input_error(meshsim({"kernel-model", path("dim.csv").string()}),
                                       {"dim.csv", "line 2", "n is \"0\"", "whole number"});
  write_file("dtype.csv", "chip,dtype,m,n,k\nh200,int4,4096,4096,4096\n");
  meshsim::testing::expect_input_error(meshsim({"kernel-model", path("dtype.csv").string()}),
                                       {"dtype.csv", "line 2", "int4", "fp8"});
  write_file("chip.csv", "chip,dtype,m,n,k\nh999,bf16,4096,4096,4096\n");
  meshsim::testing::expect_input_error(meshsim({"kernel-model", path("chip.csv").string()}),
                                       {"h999"});
  write_file("huge.csv", "chip,dtype,m,n,k,batch\nh200,bf16,16777216,16777216,16777216,1\n");
  meshsim::testing::expect_input_error(meshsim({"kernel-model", path("huge.csv").string()}),
                                       {"huge.csv", "line 2", "2^48 elements"});
  write_file("cells.csv", "chip,dtype,m,n,k\nh200,bf16,4096,4096\n");
  meshsim::testing::expect_input_error(meshsim({"kernel-model", path("cells.csv").string()}),
                                       {"cells.csv", "line 2", "4 cells"});
  meshsim::testing::expect_input_error(
      meshsim({"kernel-model", path("dim.csv").string(), "--k-half", "-1"}), {"--k-half"});
}

}  // namespace
}  // namespace meshsim::cli
