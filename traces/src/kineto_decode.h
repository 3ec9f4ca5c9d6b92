// Private to read_kineto: turns the pieces the splitter cuts (json_splitter.h) into a RankTrace.
// simdjson stays inside kineto_decode.cc (the only file that includes it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "meshsim/traces/kineto.h"

namespace meshsim::traces::detail {

class KinetoDecoder {
 public:
  // Fills `out` (its source names the file in errors).
  KinetoDecoder(RankTrace& out, const KinetoLimits& limits);
  ~KinetoDecoder();
  KinetoDecoder(const KinetoDecoder&) = delete;
  KinetoDecoder& operator=(const KinetoDecoder&) = delete;

  // A top-level value other than traceEvents (checked to be JSON; the ones meshsim reads parsed).
  // `text` is followed by at least 64 readable bytes.
  void header(const std::string& key, std::string_view text, int64_t offset);
  // Element `index` of the event array; `legacy` when the document is a bare array (locations
  // then have no "/traceEvents" prefix).
  void event(std::string_view text, int64_t index, int64_t offset, bool legacy);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "1661203462602585", "4458676524648.797", "12.5e3": a JSON number of microseconds as integer
// nanoseconds (exact for up to three decimals, rounded half away from zero beyond); nullopt when
// it is not a number or its nanoseconds pass +-2^63.
std::optional<int64_t> parse_microseconds(std::string_view token);

// The size in bytes of one element of a profiler "Input type" ("float", "c10::BFloat16",
// "c10::Half", "double", "long int", "int", "bool", ...); nullopt for non-tensors ("Scalar",
// "TensorList", "") and types it does not know.
std::optional<int64_t> element_bytes(std::string_view type);

}  // namespace meshsim::traces::detail
