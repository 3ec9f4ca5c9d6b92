// Kernel and operator names -> OpClass: the rule table documented in import.h (rule 3).
//
// A name is normalised once (lower case, the "autograd::engine::evaluate_function: " prefix
// dropped) and split into words; each rule then looks for its substrings anywhere in the name and
// for its words among the name's words. The first rule that matches wins, so the order of
// kRules is part of the contract (loss before attention: log_softmax contains "softmax";
// attention before matmul: fmha_cutlass... contains "cutlass"; communication first:
// reduce-scatter contains "scatter").
#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "meshsim/traces/import.h"

namespace meshsim::traces {

namespace {

struct Rule {
  OpClass op_class;
  std::vector<std::string_view> substrings;
  std::vector<std::string_view> words;
};

const std::vector<Rule>& rules() {
  static const std::vector<Rule> kRules = {
      {OpClass::kCommunication,
       {"nccl", "rccl", "all-reduce", "all_reduce", "allreduce", "all-gather", "all_gather",
        "allgather", "reduce-scatter", "reduce_scatter", "reducescatter", "all-to-all",
        "all_to_all", "alltoall", "collective-permute", "collective_permute", "c10d::"},
       {"send", "recv", "sendrecv"}},
      {OpClass::kLoss,
       {"cross_entropy", "crossentropy", "nll_loss", "nllloss", "log_softmax", "logsoftmax"},
       {"loss"}},
      {OpClass::kAttention,
       {"flash", "fmha", "scaled_dot_product", "scaleddotproduct", "attention", "softmax"},
       {"sdpa", "mha"}},
      {OpClass::kMatmul,
       {"gemm", "cutlass", "cublas", "xmma", "nvjet", "cijk_", "matmul", "dot_general", "%dot",
        "convolution", "output fusion", "koutput"},
       {"mm", "bmm", "addmm", "baddbmm", "addbmm", "linear", "dot", "einsum", "conv2d"}},
      {OpClass::kOptimizer,
       {"adam", "optimizer", "foreach", "multi_tensor_apply", "lamb"},
       {"sgd"}},
      {OpClass::kEmbedding, {"embedding", "index_select", "indexselect", "gather", "scatter"}, {}},
      {OpClass::kNorm,
       {"layer_norm", "layernorm", "rms_norm", "rmsnorm", "batch_norm", "batchnorm", "group_norm",
        "groupnorm", "rsqrt"},
       {"norm"}},
      {OpClass::kCopy,
       {"memcpy", "memset", "copy", "transpose", "permute", "contiguous", "clone", "concatenate",
        "dynamic-update-slice", "dynamic_update_slice", "data formatting"},
       {"to",
        "t",
        "view",
        "reshape",
        "expand",
        "slice",
        "select",
        "cat",
        "splitwithsizes",  // SplitWithSizesBackward0: a split's backward concatenates
        "split_with_sizes",
        "as_strided",
        "unsafe_view",
        "unsafeview",
        "reshapealias",
        "squeeze",
        "unsqueeze",
        "detach",
        "flatten",
        "pad",
        "broadcast",
        "bitcast",
        "tocopy",
        "lift_fresh",
        "alias",
        "split",
        "chunk",
        "stack",
        "index",
        "repeat",
        "repeat_interleave",
        "repeatinterleave",
        "unbind"}},
      {OpClass::kElementwise,
       {"elementwise", "loop fusion", "kloop", "loop_", "input fusion", "kinput", "input_",
        "reduce"},
       {"add",
        "sub",
        "rsub",
        "mul",
        "div",
        "silu",
        "gelu",
        "relu",
        "sigmoid",
        "tanh",
        "exp",
        "log",
        "pow",
        "neg",
        "sqrt",
        "mean",
        "sum",
        "fill",
        "zero",
        "zeros",
        "ones",
        "zeros_like",
        "ones_like",
        "empty",
        "empty_like",
        "empty_strided",
        "full",
        "arange",
        "where",
        "clamp",
        "clamp_min",
        "maximum",
        "minimum",
        "abs",
        "cos",
        "sin",
        "triu",
        "tril",
        "masked_fill",
        "maskedfill",
        "addcmul",
        "addcdiv",
        "threshold_backward",
        "lerp",
        "multiply",
        "subtract",
        "divide",
        "negate",
        "exponential",
        "convert",
        "compare",
        "select_n",
        "iota",
        "constant",
        "accumulategrad",
        "item",
        "local_scalar_dense",
        "norm_backward",
        "fusion_backward"}},
  };
  return kRules;
}

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

std::string trim_underscores(std::string_view w) {
  while (!w.empty() && w.front() == '_') {
    w.remove_prefix(1);
  }
  while (!w.empty() && w.back() == '_') {
    w.remove_suffix(1);
  }
  return std::string(w);
}

// "addmmbackward0" -> "addmm"; other words unchanged.
std::string strip_backward(const std::string& w) {
  const auto pos = w.rfind("backward");
  if (pos == std::string::npos || pos == 0) {
    return w;
  }
  for (size_t i = pos + 8; i < w.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(w[i])) == 0) {
      return w;
    }
  }
  return w.substr(0, pos);
}

void add_word(std::vector<std::string>& words, std::string_view raw) {
  const std::string w = trim_underscores(raw);
  if (w.empty()) {
    return;
  }
  words.push_back(w);
  const std::string fwd = strip_backward(w);
  if (fwd != w) {
    words.push_back(trim_underscores(fwd));
  }
}

// Whole tokens and their '_'-separated parts.
std::vector<std::string> split_words(std::string_view name) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < name.size()) {
    if (!is_word_char(name[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < name.size() && is_word_char(name[j])) {
      ++j;
    }
    const std::string_view token = name.substr(i, j - i);
    add_word(words, token);
    if (token.find('_') != std::string_view::npos) {
      size_t k = 0;
      while (k <= token.size()) {
        const size_t end = std::min(token.find('_', k), token.size());
        if (end > k) {
          add_word(words, token.substr(k, end - k));
        }
        k = end + 1;
      }
    }
    i = j;
  }
  return words;
}

std::string normalise(std::string_view name) {
  std::string s(name);
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  static constexpr std::string_view kAutogradPrefix = "autograd::engine::evaluate_function: ";
  if (s.starts_with(kAutogradPrefix)) {
    s.erase(0, kAutogradPrefix.size());
  }
  return s;
}

bool matches(const Rule& rule, const std::string& name, const std::vector<std::string>& words) {
  for (const std::string_view sub : rule.substrings) {
    if (name.find(sub) != std::string::npos) {
      return true;
    }
  }
  for (const std::string_view w : rule.words) {
    if (std::find(words.begin(), words.end(), w) != words.end()) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::optional<OpClass> match_kernel_class(std::string_view /*framework*/, std::string_view name) {
  const std::string norm = normalise(name);
  const std::vector<std::string> words = split_words(norm);
  for (const Rule& rule : rules()) {
    if (matches(rule, norm, words)) {
      return rule.op_class;
    }
  }
  return std::nullopt;
}

OpClass classify_kernel(std::string_view framework, std::string_view name) {
  return match_kernel_class(framework, name).value_or(OpClass::kElementwise);
}

std::array<Duration, kNumOpClasses> time_by_class(const MeasuredStep& step) {
  std::array<Duration, kNumOpClasses> out{};
  for (const MeasuredOp& op : step.ops) {
    out[static_cast<size_t>(op.op_class)] += op.duration;
  }
  return out;
}

std::array<Duration, kNumOpClasses> time_by_class(const MeasuredStep& step, int64_t device) {
  std::array<Duration, kNumOpClasses> out{};
  for (const MeasuredOp& op : step.ops) {
    if (op.device == device) {
      out[static_cast<size_t>(op.op_class)] += op.duration;
    }
  }
  return out;
}

Duration unclassified_time(const MeasuredStep& step) {
  Duration total;
  for (const MeasuredOp& op : step.ops) {
    if (!op.classified) {
      total += op.duration;
    }
  }
  return total;
}

}  // namespace meshsim::traces
