// Reading and validating a chip catalogue (schema: topology/chips.json and chip.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/topology/chip.h"
#include "meshsim/topology/roofline.h"
#include "sourced.h"

namespace meshsim::topology {
namespace {

using detail::SourceSink;

// The keys of a JSON object, in the document's (sorted) order.
std::vector<std::string> keys_of(const nlohmann::json& object) {
  std::vector<std::string> out;
  for (auto it = object.begin(); it != object.end(); ++it) {
    out.push_back(it.key());
  }
  return out;
}

void read_peaks(JsonObject& chip_obj, Chip& chip, SourceSink& sink) {
  const nlohmann::json& raw = chip_obj.raw("peak");
  JsonObject peak(raw, chip_obj.source(), chip_obj.pointer_of("peak"));
  for (const std::string& key : keys_of(raw)) {
    const std::optional<Dtype> dtype = parse_enum<Dtype>(key);
    if (!dtype) {
      peak.fail(key,
                "unknown dtype (expected one of fp32, tf32, bf16, fp16, fp8; dense rates "
                "only: int8 and sparse figures do not belong here)");
    }
    chip.peaks[*dtype] = detail::sourced_flops(peak, key, sink);
  }
  if (chip.peaks.count(Dtype::kBf16) == 0) {
    peak.fail("bf16", "required field is missing: every chip needs its dense bf16 peak");
  }
  peak.finish();
}

// {"source": "...", "fits": [{"impl", "pass", "causal", "head_dim", "e_inf", "s_half"} or
// {"impl", "model": "matmul"}, ...]}: one source for the table (the fit), entries strict.
std::vector<AttentionEfficiency> read_attention(JsonObject& eff, SourceSink& sink) {
  JsonObject table = eff.object("attention");
  const std::string source = table.string("source");
  if (source.find_first_not_of(" \t\n") == std::string::npos) {
    table.fail("source", "expected the fit or measurement the table comes from");
  }
  (*sink.sources)[table.pointer().substr(sink.base.size())] = source;
  std::vector<AttentionEfficiency> out;
  for (JsonObject& e : table.object_array("fits")) {
    AttentionEfficiency a;
    a.impl = e.choice<AttentionImpl>("impl");
    if (e.has("model")) {
      e.one_of("model", {"matmul"});
      a.as_matmul = true;
    } else {
      a.pass = e.choice<AttentionPass>("pass");
      a.causal = e.boolean("causal");
      a.head_dim = e.positive_integer("head_dim");
      a.e_inf = e.fraction("e_inf");
      a.s_half = e.number("s_half");
      if (a.s_half < 0) {
        e.fail("s_half", fmt::format("expected a non-negative key length, got {}", a.s_half));
      }
    }
    if (e.has("note")) {
      e.string("note");
    }
    e.finish();
    out.push_back(a);
  }
  table.finish();
  return out;
}

void read_efficiency(JsonObject& chip_obj, Chip& chip, SourceSink& sink) {
  JsonObject eff = chip_obj.object("efficiency");
  chip.efficiency.matmul = detail::sourced_fraction(eff, "matmul", sink);
  chip.efficiency.memory = detail::sourced_fraction(eff, "memory", sink);
  chip.efficiency.launch_overhead =
      detail::sourced_duration(eff, "launch_overhead", sink, /*allow_zero=*/true);
  if (eff.has("memory_by_class")) {
    const nlohmann::json& raw = eff.raw("memory_by_class");
    JsonObject by(raw, eff.source(), eff.pointer_of("memory_by_class"));
    for (const std::string& key : keys_of(raw)) {
      const std::optional<OpClass> c = parse_enum<OpClass>(key);
      if (!c || *c == OpClass::kCommunication) {
        by.fail(key, "unknown op class (expected one of matmul, attention, elementwise, norm, "
                     "embedding, loss, optimizer, copy)");
      }
      chip.efficiency.memory_by_class[static_cast<size_t>(*c)] =
          detail::sourced_fraction(by, key, sink);
    }
    by.finish();
  }
  if (eff.has("matmul_shape")) {
    JsonObject shape = eff.object("matmul_shape");
    MatmulShapeEfficiency m;
    m.tile_m = detail::sourced_count(shape, "tile_m", sink);
    m.tile_n = detail::sourced_count(shape, "tile_n", sink);
    if (shape.has("alternative_tiles")) {
      m.alternative_tiles = detail::sourced_tiles(shape, "alternative_tiles", sink);
    }
    m.units = detail::sourced_count(shape, "units", sink);
    m.k_half = detail::sourced_non_negative_number(shape, "k_half", sink);
    m.call_overhead = detail::sourced_duration(shape, "call_overhead", sink, /*allow_zero=*/true);
    m.per_matrix_calls =
        detail::sourced_choice(shape, "batched", {"one_call", "per_matrix"}, sink) == "per_matrix";
    if (shape.has("split_k_min")) {
      m.split_k_min = detail::sourced_count(shape, "split_k_min", sink);
    }
    shape.finish();
    chip.efficiency.matmul_shape = m;
  }
  if (eff.has("matmul_fp8")) {
    chip.efficiency.matmul_fp8 = detail::sourced_fraction(eff, "matmul_fp8", sink);
  }
  if (eff.has("matmul_fp8_fast_accum_speedup")) {
    const char* key = "matmul_fp8_fast_accum_speedup";
    if (!chip.efficiency.matmul_fp8) {
      eff.fail(key, "expected matmul_fp8 beside it (the efficiency the speedup multiplies)");
    }
    const double speedup = detail::sourced_positive_number(eff, key, sink);
    if (*chip.efficiency.matmul_fp8 * speedup > 1.0) {
      eff.fail(key, fmt::format("expected a speedup that keeps matmul_fp8 x speedup at most 1 "
                                "(got {} x {})",
                                *chip.efficiency.matmul_fp8, speedup));
    }
    chip.efficiency.matmul_fp8_fast_accum_speedup = speedup;
  }
  if (eff.has("comm_units")) {
    chip.efficiency.comm_units = detail::sourced_count(eff, "comm_units", sink);
  }
  if (eff.has("attention")) {
    chip.efficiency.attention = read_attention(eff, sink);
  }
  eff.finish();
}

// A chip of one kind refuses the parts of the other kind (`keys`), saying `why`.
void refuse(JsonObject& obj, std::initializer_list<const char*> keys, const std::string& why) {
  for (const char* key : keys) {
    if (obj.has(key)) {
      obj.fail(key, why);
    }
  }
}

// A chip's scale-out port (a GPU's "nic", a TPU's "dcn"): its bandwidth per direction and,
// when given, the fraction of it collectives achieve (the chip's default otherwise).
void read_port(JsonObject& obj, const char* key, std::optional<BytesPerSec>& bandwidth,
               double& efficiency, SourceSink& sink) {
  JsonObject port = obj.object(key);
  bandwidth = detail::sourced_bandwidth(port, "bandwidth", sink);
  if (port.has("efficiency")) {
    efficiency = detail::sourced_fraction(port, "efficiency", sink);
  }
  port.finish();
}

void read_gpu_parts(JsonObject& obj, Chip& chip, SourceSink& sink) {
  refuse(obj, {"ici", "dcn", "tpu"},
         "not allowed for a gpu chip (\"ici\", \"dcn\" and \"tpu\" describe TPUs; a gpu takes "
         "\"nvlink\", \"nic\", \"host_link\" and \"gpu\")");
  JsonObject nvlink = obj.object("nvlink");
  NvlinkSpec nv{};
  nv.generation = detail::sourced_count(nvlink, "generation", sink);
  nv.links = detail::sourced_count(nvlink, "links", sink);
  nv.link_bandwidth = detail::sourced_bandwidth(nvlink, "link_bandwidth", sink);
  if (nvlink.has("efficiency")) {
    nv.efficiency = detail::sourced_fraction(nvlink, "efficiency", sink);
  }
  if (nvlink.has("nvls_efficiency")) {
    nv.nvls_efficiency = detail::sourced_fraction(nvlink, "nvls_efficiency", sink);
  }
  nvlink.finish();
  chip.nvlink = nv;

  read_port(obj, "nic", chip.nic_bandwidth, chip.nic_efficiency, sink);

  if (obj.has("host_link")) {
    JsonObject host = obj.object("host_link");
    chip.host_link = HostLinkSpec{detail::sourced_bandwidth(host, "to_device", sink),
                                  detail::sourced_bandwidth(host, "to_host", sink)};
    host.finish();
  }

  JsonObject gpu = obj.object("gpu");
  GpuMicroarch g{};
  g.sm_count = detail::sourced_count(gpu, "sm_count", sink);
  if (gpu.has("boost_clock")) {
    g.boost_clock_hz = detail::sourced_frequency(gpu, "boost_clock", sink);
  }
  g.max_threads_per_sm = detail::sourced_count(gpu, "max_threads_per_sm", sink);
  g.smem_per_sm = detail::sourced_bytes(gpu, "smem_per_sm", sink);
  g.max_blocks_per_sm = detail::sourced_count(gpu, "max_blocks_per_sm", sink);
  if (gpu.has("architecture")) {
    const std::string a =
        detail::sourced_choice(gpu, "architecture", enum_choices<GpuArchitecture>(), sink);
    g.architecture = parse_enum<GpuArchitecture>(a);
  }
  gpu.finish();
  chip.gpu = g;
}

// The MXUs must account for the published bf16 peak; a mismatch means a wrong count, size or clock.
void check_mxu_consistency(JsonObject& tpu_obj, const Chip& chip) {
  const TpuMicroarch& t = *chip.tpu;
  const double derived =
      systolic_peak(t.mxu_rows, t.mxu_cols, t.clock_hz).value() * static_cast<double>(t.mxu_count);
  const double bf16 = chip.peaks.at(Dtype::kBf16).value();
  if (std::fabs(derived - bf16) > 0.01 * bf16) {
    tpu_obj.fail("clock",
                 fmt::format("mxu_count x 2 x mxu_rows x mxu_cols x clock = {:.1f} TFLOP/s "
                             "but the bf16 peak is {:.1f} TFLOP/s (they must agree within "
                             "1%)",
                             derived * 1e-12, bf16 * 1e-12));
  }
}

void read_tpu_parts(JsonObject& obj, Chip& chip, SourceSink& sink) {
  refuse(obj, {"nvlink", "nic", "gpu"},
         "not allowed for a tpu chip (\"nvlink\", \"nic\" and \"gpu\" describe GPUs; a tpu "
         "takes \"ici\", \"dcn\" and \"tpu\")");
  JsonObject ici = obj.object("ici");
  IciSpec spec{};
  spec.links = detail::sourced_count(ici, "links", sink);
  spec.link_bandwidth = detail::sourced_bandwidth(ici, "link_bandwidth", sink);
  spec.torus_dims = detail::sourced_count(ici, "torus_dims", sink);
  if (spec.torus_dims != 2 && spec.torus_dims != 3) {
    ici.fail("torus_dims", fmt::format("expected 2 or 3, got {}", spec.torus_dims));
  }
  if (spec.links != 2 * spec.torus_dims) {
    ici.fail("links", fmt::format("a {}D torus has {} links per chip, got {}", spec.torus_dims,
                                  2 * spec.torus_dims, spec.links));
  }
  spec.chips_per_host = detail::sourced_count(ici, "chips_per_host", sink);
  if (spec.torus_dims == 2) {
    spec.pod_edge = detail::sourced_count(ici, "pod_edge", sink);
  } else if (ici.has("pod_edge")) {
    ici.fail("pod_edge",
             "only a 2D torus takes a pod edge (a 3D slice is sized and wrapped by 4x4x4 cubes)");
  }
  if (ici.has("efficiency")) {
    spec.efficiency = detail::sourced_fraction(ici, "efficiency", sink);
  }
  ici.finish();
  chip.ici = spec;

  read_port(obj, "dcn", chip.dcn_bandwidth, chip.dcn_efficiency, sink);

  JsonObject tpu = obj.object("tpu");
  TpuMicroarch t{};
  t.mxu_count = detail::sourced_count(tpu, "mxu_count", sink);
  t.mxu_rows = detail::sourced_count(tpu, "mxu_rows", sink);
  t.mxu_cols = detail::sourced_count(tpu, "mxu_cols", sink);
  t.clock_hz = detail::sourced_frequency(tpu, "clock", sink);
  chip.tpu = t;
  check_mxu_consistency(tpu, chip);
  tpu.finish();
}

void check_name(JsonObject& chips, const std::string& name) {
  const bool ok = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
  });
  if (!ok) {
    chips.fail(name, "chip names are lower-case letters, digits, '-' and '.' (e.g. \"h100-sxm\")");
  }
}

Chip parse_chip(JsonObject& chips, const std::string& name) {
  check_name(chips, name);
  JsonObject obj = chips.object(name);
  Chip chip;
  chip.name = name;
  SourceSink sink{&chip.sources, obj.pointer()};
  chip.kind = obj.choice<ChipKind>("kind");
  chip.description = obj.string("description");
  if (obj.has("variant_of")) {  // merged already (resolve_variants); its source is kept
    JsonObject variant = obj.object("variant_of");
    chip.sources["/variant_of"] = variant.string("chip") + ": " + variant.string("source");
    variant.finish();
  }
  read_peaks(obj, chip, sink);
  JsonObject hbm = obj.object("hbm");
  chip.hbm_capacity = detail::sourced_bytes(hbm, "capacity", sink);
  chip.hbm_bandwidth = detail::sourced_bandwidth(hbm, "bandwidth", sink);
  hbm.finish();
  if (obj.has("cache")) {
    JsonObject cache = obj.object("cache");
    CacheSpec c;
    c.capacity = detail::sourced_bytes(cache, "capacity", sink);
    c.bandwidth = detail::sourced_bandwidth(cache, "bandwidth", sink);
    cache.finish();
    if (c.capacity >= chip.hbm_capacity) {
      obj.fail("cache", "the cache must be smaller than the memory it caches (/hbm/capacity)");
    }
    chip.cache = c;
  }
  read_efficiency(obj, chip, sink);
  if (chip.kind == ChipKind::kGpu) {
    read_gpu_parts(obj, chip, sink);
  } else {
    read_tpu_parts(obj, chip, sink);
  }
  obj.finish();
  return chip;
}

// A chip entry may be a variant of another: {"variant_of": {"chip": "h100-sxm", "source": "what
// differs and why the rest is the same"}, ...the fields that differ, each with its source}. Its
// entry is the base's with the variant's fields merged over it (JSON merge patch, RFC 7386:
// objects merge key by key, any other value replaces the base's), then read as any other; every
// figure it does not restate keeps the base's value and source. The base must be a chip of the
// same file that is not itself a variant.
nlohmann::json resolve_variants(const nlohmann::json& raw, JsonObject& chips) {
  if (!raw.is_object()) {
    return raw;  // the JsonObject over it has refused it already
  }
  nlohmann::json resolved = raw;
  for (const std::string& name : keys_of(raw)) {
    const nlohmann::json& entry = raw[name];
    if (!entry.is_object() || !entry.contains("variant_of")) {
      continue;
    }
    const nlohmann::json& of = entry["variant_of"];
    const nlohmann::json* base_name = of.is_object() && of.contains("chip") ? &of["chip"] : nullptr;
    if (base_name == nullptr || !base_name->is_string()) {
      chips.fail(name, "variant_of: expected {\"chip\": a chip of this catalogue, \"source\": ...}");
    }
    const std::string base = base_name->get<std::string>();
    if (!raw.contains(base) || !raw[base].is_object() || raw[base].contains("variant_of")) {
      chips.fail(name, fmt::format("variant_of: \"{}\" is not a chip of this catalogue that is "
                                   "not itself a variant",
                                   base));
    }
    nlohmann::json merged = raw[base];
    merged.merge_patch(entry);
    resolved[name] = std::move(merged);
  }
  return resolved;
}

}  // namespace

Catalogue Catalogue::parse(const nlohmann::json& document, const std::string& source) {
  JsonObject root(document, source);
  if (root.has("notes")) {
    root.string("notes");  // free text for readers; must be a string
  }
  JsonObject unresolved(root.raw("chips"), source, root.pointer_of("chips"));
  const nlohmann::json resolved = resolve_variants(root.raw("chips"), unresolved);
  const nlohmann::json& raw = resolved;
  JsonObject chips(raw, source, root.pointer_of("chips"));
  Catalogue catalogue;
  catalogue.source_ = source;
  for (const std::string& name : keys_of(raw)) {
    catalogue.chips_.push_back(parse_chip(chips, name));
  }
  if (catalogue.chips_.empty()) {
    root.fail("chips", "expected at least one chip");
  }
  chips.finish();
  root.finish();
  std::sort(catalogue.chips_.begin(), catalogue.chips_.end(),
            [](const Chip& a, const Chip& b) { return a.name < b.name; });
  return catalogue;
}

}  // namespace meshsim::topology
