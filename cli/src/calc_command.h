// `meshsim calc --model NAME [--seq S] [--mbs B]`: the exact accounting of a model as a table.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace meshsim::cli {

void print_accounting(const std::string& model, int64_t seq_len, int64_t micro_batch,
                      std::ostream& out);

}  // namespace meshsim::cli
