// Synthetic PyTorch profiler (Kineto) traces for tests: the events a real one has for what a test
// needs (operators, launch calls, kernels with their correlation, NCCL metadata, ProfilerStep
// ranges, synchronizing calls), in Kineto's layout (traceEvents, deviceProperties,
// distributedInfo). Times are microseconds, as the file writes them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace meshsim::testing {

class KinetoBuilder {
 public:
  explicit KinetoBuilder(int64_t rank = 0, int64_t world = 1,
                         const std::string& device = "NVIDIA H100 80GB HBM3",
                         int64_t memory = 85'000'000'000) {
    doc_["schemaVersion"] = 1;
    doc_["deviceProperties"] = {{{"id", 0}, {"name", device}, {"totalGlobalMem", memory},
                                 {"numSms", 132}}};
    doc_["distributedInfo"] = {{"backend", "nccl"}, {"rank", rank}, {"world_size", world}};
    doc_["traceEvents"] = nlohmann::json::array();
  }

  nlohmann::json& doc() { return doc_; }
  std::string text() const { return doc_.dump(); }

  void step(int64_t n, double ts, double dur) {
    add({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#" + std::to_string(n)},
         {"pid", 100}, {"tid", 1}, {"ts", ts}, {"dur", dur}});
  }
  void annotation(const std::string& name, double ts, double dur) {
    add({{"ph", "X"}, {"cat", "user_annotation"}, {"name", name}, {"pid", 100}, {"tid", 1},
         {"ts", ts}, {"dur", dur}});
  }
  // An operator; `dims` and `types` its record_shapes args (omitted when empty). Returns its
  // External id.
  int64_t op(const std::string& name, double ts, double dur,
             const nlohmann::json& dims = nullptr, const nlohmann::json& types = nullptr) {
    const int64_t ext = next_ext_++;
    nlohmann::json args = {{"External id", ext}};
    if (!dims.is_null()) {
      args["Input Dims"] = dims;
      args["Input type"] = types;
    }
    add({{"ph", "X"}, {"cat", "cpu_op"}, {"name", name}, {"pid", 100}, {"tid", 1}, {"ts", ts},
         {"dur", dur}, {"args", args}});
    return ext;
  }
  // A kernel on `stream` and the cudaLaunchKernel call [launch_ts, launch_ts + launch_dur) on the
  // host thread that launched it; `extra` args are merged into the kernel's (NCCL metadata).
  void kernel(const std::string& name, double ts, double dur, int64_t stream, double launch_ts,
              double launch_dur = 1, const nlohmann::json& extra = nlohmann::json::object(),
              const std::string& cat = "kernel") {
    const int64_t corr = next_corr_++;
    add({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"pid", 100},
         {"tid", 1}, {"ts", launch_ts}, {"dur", launch_dur}, {"args", {{"correlation", corr}}}});
    nlohmann::json args = {{"device", 0}, {"stream", stream}, {"correlation", corr}};
    args.update(extra);
    add({{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", 0}, {"tid", stream}, {"ts", ts},
         {"dur", dur}, {"args", args}});
  }
  // A kernel whose launch is not in the trace, with correlation `corr` (a call before the trace
  // began has a smaller one than every call in it; the builder's calls start at 1000).
  void unlaunched_kernel(const std::string& name, double ts, double dur, int64_t stream,
                         int64_t corr) {
    add({{"ph", "X"},
         {"cat", "kernel"},
         {"name", name},
         {"pid", 0},
         {"tid", stream},
         {"ts", ts},
         {"dur", dur},
         {"args", {{"device", 0}, {"stream", stream}, {"correlation", corr}}}});
  }
  void runtime(const std::string& name, double ts, double dur) {
    add({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", name}, {"pid", 100}, {"tid", 1},
         {"ts", ts}, {"dur", dur}, {"args", {{"correlation", next_corr_++}}}});
  }
  void add(nlohmann::json e) { doc_["traceEvents"].push_back(std::move(e)); }

  // NCCL metadata of an all-reduce of `elements` bf16 values over `ranks`.
  static nlohmann::json all_reduce(int64_t elements, const std::vector<int64_t>& ranks) {
    std::string list = "[";
    for (size_t i = 0; i < ranks.size(); ++i) {
      list += (i ? ", " : "") + std::to_string(ranks[i]);
    }
    return {{"Collective name", "allreduce"}, {"In msg nelems", elements},
            {"Out msg nelems", elements}, {"Group size", ranks.size()}, {"dtype", "BFloat16"},
            {"Process Group Name", "0"}, {"Process Group Ranks", list + "]"}};
  }

 private:
  nlohmann::json doc_;
  int64_t next_corr_ = 1000;
  int64_t next_ext_ = 1;
};

}  // namespace meshsim::testing
