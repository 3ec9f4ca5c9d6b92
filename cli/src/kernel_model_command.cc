#include "kernel_model_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>
#include <vector>

#include "meshsim/sim/csv.h"
#include "meshsim/sim/enum_names.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/sim/program.h"
#include "meshsim/topology/chip.h"
#include "meshsim/topology/compute_model.h"

namespace meshsim::cli {
namespace {

// A table of shapes is small (a sweep of a few thousand rows); 16 MiB bounds what is read.
constexpr int64_t kMaxShapesBytes = int64_t{16} << 20;
constexpr int64_t kMaxDimension = int64_t{1} << 24;  // 16 M: beyond any GEMM of a training step
constexpr double kMaxElements = 281474976710656.0;   // 2^48, as the trace importer bounds GEMMs

struct ShapeRow {
  std::string chip;
  Dtype dtype = Dtype::kBf16;
  MatmulShape shape;
  bool fast_accumulation = false;
};

int64_t parse_dimension(const std::string& text, const std::string& source,
                        const std::string& where, const std::string& column) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || v < 1 || v > kMaxDimension) {
    throw InputError(source, where,
                     fmt::format("{} is \"{}\": expected a whole number from 1 to {}", column, text,
                                 kMaxDimension));
  }
  return v;
}

std::vector<ShapeRow> read_shapes(const std::string& path) {
  const std::string text = read_input_file(path, kMaxShapesBytes, "a table of GEMM shapes");
  std::istringstream in(text);
  std::string line;
  std::map<std::string, size_t> column;
  std::vector<ShapeRow> rows;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line == "\r") {
      continue;
    }
    const std::vector<std::string> cells = split_csv_line(line);
    const std::string where = fmt::format("line {}", number);
    if (column.empty()) {
      for (size_t i = 0; i < cells.size(); ++i) {
        column[cells[i]] = i;
      }
      for (const char* required : {"chip", "dtype", "m", "n", "k"}) {
        if (!column.contains(required)) {
          throw InputError(path, where,
                           fmt::format("the header has no column \"{}\": expected "
                                       "chip,dtype,m,n,k[,batch][,fast_accumulation]",
                                       required));
        }
      }
      continue;
    }
    if (cells.size() != column.size()) {
      throw InputError(path, where,
                       fmt::format("{} cells, the header has {}", cells.size(), column.size()));
    }
    const auto cell = [&](const std::string& name) { return cells[column.at(name)]; };
    ShapeRow r;
    r.chip = cell("chip");
    const std::optional<Dtype> dtype = parse_enum<Dtype>(cell("dtype"));
    if (!dtype) {
      throw InputError(path, where,
                       fmt::format("dtype is \"{}\": expected one of {}", cell("dtype"),
                                   fmt::join(enum_choices<Dtype>(), ", ")));
    }
    r.dtype = *dtype;
    r.shape.m = parse_dimension(cell("m"), path, where, "m");
    r.shape.n = parse_dimension(cell("n"), path, where, "n");
    r.shape.k = parse_dimension(cell("k"), path, where, "k");
    if (column.contains("batch") && !cell("batch").empty()) {
      r.shape.batch = parse_dimension(cell("batch"), path, where, "batch");
    }
    const auto [m, n, k] =
        std::tuple{static_cast<double>(r.shape.m), static_cast<double>(r.shape.n),
                   static_cast<double>(r.shape.k)};
    if ((m * k + k * n + m * n) * static_cast<double>(r.shape.batch) > kMaxElements) {
      throw InputError(path, where,
                       fmt::format("{}x{}x{} (batch {}): the operands and result hold more than "
                                   "2^48 elements (512 TB in bf16): not a GEMM of this world",
                                   r.shape.m, r.shape.n, r.shape.k, r.shape.batch));
    }
    if (column.contains("fast_accumulation")) {
      const std::string f = cell("fast_accumulation");
      if (f != "" && f != "0" && f != "1" && f != "true" && f != "false") {
        throw InputError(path, where,
                         fmt::format("fast_accumulation is \"{}\": expected true or false", f));
      }
      r.fast_accumulation = f == "1" || f == "true";
    }
    rows.push_back(std::move(r));
  }
  if (column.empty()) {
    throw InputError(path, "line 1",
                     "no header: expected chip,dtype,m,n,k[,batch][,fast_accumulation]");
  }
  return rows;
}

}  // namespace

CLI::App* add_kernel_model_command(CLI::App& app, KernelModelArgs& a) {
  CLI::App* c = app.add_subcommand(
      "kernel-model",
      "Evaluate the GEMM cost model on a CSV of shapes (chip,dtype,m,n,k[,batch]"
      "[,fast_accumulation]): tiling, efficiency and time per row, as a simulation costs them");
  c->add_option("shapes", a.shapes, "CSV of GEMM shapes with a header row ('-': standard input)")
      ->required();
  c->add_option("--hardware-catalogue", a.hardware_catalogue,
                "Chip catalogue to take the chips from (default: the built-in one)");
  c->add_option("--k-half", a.k_half,
                "Use this k_half (the reduction length at which a GEMM reaches half its "
                "efficiency) for every chip instead of its catalogue value")
      ->check(CLI::Range(0.0, 1e6));
  c->add_option("--out", a.out, "Write the CSV to FILE ('-': standard output)")
      ->capture_default_str();
  return c;
}

int kernel_model_command(const KernelModelArgs& a, std::ostream& out) {
  const std::vector<ShapeRow> rows = read_shapes(a.shapes == "-" ? "/dev/stdin" : a.shapes);
  const topology::Catalogue catalogue = a.hardware_catalogue
                                            ? topology::Catalogue::load(*a.hardware_catalogue)
                                            : topology::Catalogue::builtin();
  std::ofstream file;
  std::ostream* os = &out;
  if (a.out != "-") {
    file.open(a.out);
    if (!file) {
      throw InputError(a.out, "", "cannot open for writing (--out)");
    }
    os = &file;
  }
  *os << "chip,dtype,m,n,k,batch,fast_accumulation,quantization,k_per_slice,slices,"
         "tile_factor,efficiency,flops_bound_s,memory_bound_s,overhead_s,time_s\n";
  std::map<std::string, topology::RooflineComputeModel> models;
  for (const ShapeRow& r : rows) {
    auto it = models.find(r.chip);
    if (it == models.end()) {
      topology::Chip chip = catalogue.chip(r.chip);
      if (a.k_half && chip.efficiency.matmul_shape) {
        chip.efficiency.matmul_shape->k_half = *a.k_half;
      }
      it = models.emplace(r.chip, topology::RooflineComputeModel(std::move(chip))).first;
    }
    const topology::RooflineComputeModel& model = it->second;
    // The output at the activation width: 16 bits, 32 for fp32 and tf32 GEMMs.
    ComputeWork w = matmul_work(r.shape, r.dtype, std::max<int64_t>(2, bytes_per_element(r.dtype)));
    w.fast_accumulation = r.fast_accumulation;
    const auto& shape_model = model.chip().efficiency.matmul_shape;
    const topology::GemmTiling t =
        shape_model ? topology::gemm_tiling(*shape_model, r.shape) : topology::GemmTiling{};
    const topology::KernelTime time = model.kernel_time(w);
    *os << fmt::format(
        "{},{},{},{},{},{},{},{:.9g},{:.9g},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g}\n", r.chip,
        to_string(r.dtype), r.shape.m, r.shape.n, r.shape.k, r.shape.batch,
        r.fast_accumulation ? "true" : "false", t.quantization, t.k_per_slice, t.slices, t.rate,
        model.flop_efficiency(w), time.flops_bound.seconds(), time.memory_bound.seconds(),
        time.overhead.seconds(), time.total().seconds());
  }
  return 0;
}

}  // namespace meshsim::cli
