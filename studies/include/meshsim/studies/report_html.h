// The sweep's report: one self-contained HTML file (no network: Vega is inlined) with the plots
// people expect of a scaling study:
//   * scaling: tokens/s and MFU against the device count, one line per other-axes combination;
//   * step-time breakdown of each point's best plan: compute, exposed TP, CP, DP, PP, EP
//     communication and the pipeline bubble (stacked; exposed kinds may overlap each other);
//   * memory per pipeline stage of each point's best plan, by category (weights, gradients,
//     optimizer state, activations, buffers);
//   * the top plans side by side: a table and their step times.
// Plots are Vega specs rendered by Debian's libjs-vega (its per-module builds, read at run time
// from `vega_dir` and inlined, loaded through a small AMD shim since Debian ships no single
// bundle). The page marks its <body> with data-rendered="N" once its N views have rendered.
#pragma once

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace meshsim::studies {

struct HtmlOptions {
  std::string vega_dir = "/usr/share/javascript/vega";  // Debian's libjs-vega
};

// `sweep` as merge_sweep gives it. InputError (naming vega_dir) when a Vega module is missing.
void write_sweep_html(const nlohmann::json& sweep, const HtmlOptions& options, std::ostream& out);

// The Vega specs of the report's plots (exposed for tests), by name: "scaling_tokens",
// "scaling_mfu", "breakdown", "memory", "top_plans".
nlohmann::json sweep_charts(const nlohmann::json& sweep);

}  // namespace meshsim::studies
