// Reading nccl-tests logs (nccl_tests.h). The formats are those of NVIDIA/nccl-tests'
// src/common.cu (v2.0.0 to v2.17.2) and src/util.cu (v2.17.3 to v2.19.6): writeDeviceReport /
// the "# Using devices" block, writeResultHeader (the column header), writeBenchmarkLinePreamble
// and writeBenchmarkLineBody (a row), writeResultFooter.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/sim/text.h"
#include "meshsim/sim/unit_parse.h"
#include "meshsim/traces/nccl_tests.h"

namespace meshsim::traces {
namespace {

std::vector<std::string_view> fields(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])) != 0) {
      ++i;
    }
    const size_t start = i;
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])) == 0) {
      ++i;
    }
    if (i > start) {
      out.push_back(s.substr(start, i - start));
    }
  }
  return out;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// `mpirun --tag-output` writes "[1,0]<stdout>:" before every line of rank 1,0.
std::string_view strip_mpi_tag(std::string_view line) {
  if (line.empty() || line.front() != '[') {
    return line;
  }
  const size_t close = line.find("]<std");
  if (close == std::string_view::npos || close > 24) {
    return line;
  }
  const size_t colon = line.find(">:", close);
  return colon == std::string_view::npos ? line : line.substr(colon + 2);
}

bool all_digits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "2.18.5" (or "2.18") at the start of `s`: digits and dots, ending before anything else.
std::optional<std::string> version_prefix(std::string_view s) {
  size_t n = 0;
  int dots = 0;
  while (n < s.size() && n < 16 && (std::isdigit(static_cast<unsigned char>(s[n])) != 0 || s[n] == '.')) {
    dots += s[n] == '.' ? 1 : 0;
    ++n;
  }
  const std::string_view v = s.substr(0, n);
  if (dots < 1 || dots > 2 || v.front() == '.' || v.back() == '.' ||
      v.find("..") != std::string_view::npos) {
    return std::nullopt;
  }
  return std::string(v);
}

// The layout of rows that a column header names.
struct Layout {
  int64_t line = 0;
  std::string text;          // the header's names, for messages
  size_t left = 0;           // text columns before the first time column (size, count, type, ...)
  size_t right = 0;          // fields from the first time column on (with a timestamp: 2 more)
  size_t group = 0;          // fields per half (time, algbw, busbw, wrong[, per-iteration])
  bool cpu_time = false;
  bool timestamp = false;
  std::array<size_t, 3> at{0, 1, 2};  // time, algbw, busbw within a half
};

// "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time ..." -> a Layout, or nullopt
// when the names are not a column header.
std::optional<Layout> layout_of(const std::vector<std::string_view>& names, int64_t line) {
  if (names.size() < 4 || names[0] != "size" || names[1] != "count") {
    return std::nullopt;
  }
  std::vector<size_t> starts;
  for (size_t i = 2; i < names.size(); ++i) {
    if (names[i] == "time" || names[i] == "cputime") {
      starts.push_back(i);
    }
  }
  if (starts.size() != 2) {
    return std::nullopt;
  }
  Layout l;
  l.line = line;
  for (const std::string_view n : names) {
    if (!l.text.empty()) {
      l.text += ' ';
    }
    l.text.append(n);
  }
  l.left = starts[0];
  l.group = starts[1] - starts[0];
  l.cpu_time = names[starts[0]] == "cputime";
  l.timestamp = names.back() == "timestamp";
  const size_t measured = names.size() - starts[0] - (l.timestamp ? 1 : 0);
  if (measured != 2 * l.group) {
    return std::nullopt;
  }
  l.right = measured + (l.timestamp ? 2 : 0);
  for (size_t k = 0; k < 3; ++k) {
    static constexpr std::array<std::string_view, 3> kNames = {"time", "algbw", "busbw"};
    const auto begin = names.begin() + static_cast<std::ptrdiff_t>(starts[0]);
    const auto it = std::find(begin, begin + static_cast<std::ptrdiff_t>(l.group), kNames[k]);
    if (k > 0 && it == begin + static_cast<std::ptrdiff_t>(l.group)) {
      return std::nullopt;
    }
    l.at[k] = k == 0 ? 0 : static_cast<size_t>(it - begin);
  }
  return l;
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& source) : text_(text), source_(source) {
    log_.source = source;
  }

  NcclTestsLog run() {
    size_t pos = 0;
    while (pos <= text_.size()) {
      const size_t end = std::min(text_.find('\n', pos), text_.size());
      ++line_;
      line(strip_mpi_tag(text_.substr(pos, end - pos)));
      pos = end + 1;
    }
    close_run();
    if (rows_ == 0) {
      throw InputError(source_, "",
                       "no nccl-tests measurements found (expected a column header such as "
                       "\"#  size  count  type  redop  root  time  algbw  busbw  #wrong ...\" and "
                       "rows of numbers under it, as all_reduce_perf prints them)");
    }
    return std::move(log_);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw InputError(source_, fmt::format("line {}", line_), message);
  }

  NcclTestsRun& current() {
    if (!run_) {
      run_.emplace();
      run_->line = line_;
    }
    return *run_;
  }

  void close_run() {
    if (run_ && (!run_->rows.empty() || !run_->devices.empty())) {
      log_.runs.push_back(std::move(*run_));
    }
    run_.reset();
    layout_.reset();
  }

  // "# nccl-tests version" and "# Collective test starting" come before the "# nThread" line that
  // starts a run: they start it.
  NcclTestsRun& start_or_current() {
    if (run_ && !run_->rows.empty()) {
      close_run();
    }
    return current();
  }

  void line(std::string_view raw) {
    const std::string_view l = trim(raw);
    if (l.empty()) {
      return;
    }
    if (l.front() == '#') {
      comment(trim(l.substr(1)));
      return;
    }
    nccl_line(l);
    const std::vector<std::string_view> f = fields(l);
    if (layout_ && all_digits(f.front())) {
      row(f);
    }
  }

  void comment(std::string_view c) {
    const std::vector<std::string_view> f = fields(c);
    if (f.empty()) {
      return;
    }
    if (starts_with(c, "nccl-tests version")) {
      version_line(f);
    } else if (starts_with(c, "Collective test starting:")) {
      program(start_or_current(), trim(c.substr(25)));
    } else if (starts_with(c, "Collective test concluded:")) {
      program(current(), trim(c.substr(26)));
    } else if (f[0] == "nThread" || f[0] == "nThreads:") {
      NcclTestsRun& r = start_or_current();
      if (!r.rows.empty()) {
        close_run();
      }
      current();
    } else if (f[0] == "Rank" && f.size() >= 6) {
      device(c, f);
    } else if (f[0] == "size" && f.size() > 1 && f[1] == "count") {
      column_header(f);
    } else if (starts_with(c, "Out of bounds values")) {
      current().out_of_bounds = integer_after_colon(c, "Out of bounds values");
    } else if (starts_with(c, "Avg bus bandwidth")) {
      current().avg_busbw_gbps = number_after_colon(c, "Avg bus bandwidth");
    }
  }

  void version_line(const std::vector<std::string_view>& f) {
    NcclTestsRun& r = start_or_current();
    if (f.size() >= 3) {
      r.tests_version = std::string(f[2]);
    }
    for (const std::string_view item : f) {
      if (starts_with(item, "nccl-library=")) {
        const std::optional<int64_t> code = parse_integer(item.substr(13));
        const std::optional<std::string> v = code ? nccl_version_of_code(*code) : std::nullopt;
        if (!v) {
          fail(fmt::format("\"{}\": expected NCCL's version code (e.g. nccl-library=21805 for "
                           "2.18.5)",
                           item));
        }
        r.nccl_version = *v;
      }
    }
  }

  void program(NcclTestsRun& r, std::string_view name) {
    const std::string p(fields(name).empty() ? std::string_view{} : fields(name).front());
    if (!r.program.empty() && r.program != p) {
      fail(fmt::format("the test concludes as \"{}\" but started as \"{}\"", p, r.program));
    }
    r.program = p;
    r.test = nccl_test_named_in(p);
  }

  // "Rank  0 Group  0 Pid 1006102 on pool0-01806 device  0 [0000:19:00] NVIDIA H100 80GB HBM3"
  // (v2.13 on) or "Rank  0 Pid 112372 on localhost device  0 [0x00] A100-SXM4-40GB".
  void device(std::string_view c, const std::vector<std::string_view>& f) {
    const std::optional<int64_t> rank = parse_integer(f[1]);
    const auto on = std::find(f.begin(), f.end(), std::string_view("on"));
    const auto dev = std::find(f.begin(), f.end(), std::string_view("device"));
    if (!rank || *rank < 0 || on == f.end() || on + 1 >= f.end() || dev == f.end() || dev < on) {
      fail(fmt::format("\"# {}\": expected a device line such as \"#  Rank  0 Group  0 Pid 1234 "
                       "on host device  0 [0000:19:00] NVIDIA H100 80GB HBM3\"",
                       c));
    }
    NcclTestsRun& r = current();
    if (static_cast<int64_t>(r.devices.size()) >= kMaxNcclTestsDevices) {
      fail(fmt::format("more than {} device lines in one test", kMaxNcclTestsDevices));
    }
    NcclTestsDevice d;
    d.rank = *rank;
    d.host = std::string(*(on + 1));
    const size_t bracket = c.find(']');
    d.name = bracket == std::string_view::npos ? "" : std::string(trim(c.substr(bracket + 1)));
    if (d.rank != static_cast<int64_t>(r.devices.size())) {
      fail(fmt::format("device line of rank {} where rank {} was expected (ranks are listed in "
                       "order from 0)",
                       d.rank, r.devices.size()));
    }
    r.devices.push_back(std::move(d));
  }

  void column_header(const std::vector<std::string_view>& f) {
    if (run_ && !run_->rows.empty()) {  // a second table without a "# nThread" line between
      NcclTestsRun next;
      next.line = line_;
      next.tests_version = run_->tests_version;
      next.nccl_version = run_->nccl_version;
      next.devices = run_->devices;
      close_run();
      run_ = std::move(next);
    }
    layout_ = layout_of(f, line_);
    if (!layout_) {
      std::string names;
      for (const std::string_view n : f) {
        if (!names.empty()) {
          names += ' ';
        }
        names.append(n);
      }
      fail(fmt::format("column header \"{}\": expected size and count, then two halves (out of "
                       "place, in place) each starting with time (or cputime) and naming algbw "
                       "and busbw",
                       names));
    }
    current().cpu_time = layout_->cpu_time;
  }

  double measured(std::string_view v, std::string_view what) const {
    const std::optional<double> x = meshsim::parse_number(v);
    if (!x || *x < 0) {
      fail(fmt::format("{} \"{}\": expected a non-negative number", what, v));
    }
    return *x;
  }

  NcclTestsTiming half(const std::vector<std::string_view>& f, size_t first) const {
    const Layout& l = *layout_;
    NcclTestsTiming t;
    t.time_us = measured(f[first + l.at[0]], "time");
    t.algbw_gbps = measured(f[first + l.at[1]], "algbw");
    t.busbw_gbps = measured(f[first + l.at[2]], "busbw");
    return t;
  }

  void row(const std::vector<std::string_view>& f) {
    const Layout& l = *layout_;
    const size_t n = f.size();
    NcclTestsRow r;
    r.line = line_;
    size_t left = 0;
    if (n >= 2 + l.right && n - l.right <= l.left) {
      left = n - l.right;
      r.out_of_place = half(f, left);
      r.in_place = half(f, left + l.group);
    } else {
      fail(fmt::format("a row of {} fields where the column header on line {} names \"{}\" "
                       "(expected {} to {} fields)",
                       n, l.line, l.text, 2 + l.right, l.left + l.right));
    }
    const std::optional<int64_t> bytes = parse_integer(f[0]);
    const std::optional<int64_t> count = parse_integer(f[1]);
    if (!bytes || *bytes < 0) {
      fail(fmt::format("size \"{}\": expected a byte count below 2^63", f[0]));
    }
    if (!count || *count < 0) {
      fail(fmt::format("count \"{}\": expected an element count below 2^63", f[1]));
    }
    r.bytes = *bytes;
    r.count = *count;
    r.type = left > 2 ? std::string(f[2]) : "";
    if (rows_ >= kMaxNcclTestsRows) {
      fail(fmt::format("more than {} rows of measurements", kMaxNcclTestsRows));
    }
    ++rows_;
    current().rows.push_back(std::move(r));
  }

  // NCCL's own lines: its version, and NCCL_ALGO / NCCL_PROTO as the environment set them.
  void nccl_line(std::string_view l) {
    const size_t v = l.find("NCCL version ");
    if (v != std::string_view::npos) {
      if (const std::optional<std::string> version = version_prefix(l.substr(v + 13))) {
        if (log_.nccl_version && *log_.nccl_version != *version) {
          fail(fmt::format("NCCL version {} here, but {} earlier in the log: one log, one NCCL",
                           *version, *log_.nccl_version));
        }
        log_.nccl_version = version;
      }
    }
    acknowledged(l, "NCCL_ALGO set by environment to ", log_.nccl_algo, "NCCL_ALGO");
    acknowledged(l, "NCCL_PROTO set by environment to ", log_.nccl_proto, "NCCL_PROTO");
  }

  void acknowledged(std::string_view l, std::string_view phrase, std::optional<std::string>& into,
                    std::string_view name) {
    const size_t at = l.find(phrase);
    if (at == std::string_view::npos) {
      return;
    }
    const std::string value(trim(l.substr(at + phrase.size())).substr(0, 64));
    if (into && *into != value) {
      fail(fmt::format("{} set to \"{}\" here, but \"{}\" earlier in the log", name, value,
                       *into));
    }
    into = value;
  }

  std::string_view after_colon(std::string_view c, std::string_view what) const {
    const size_t colon = c.find(':');
    if (colon == std::string_view::npos || fields(c.substr(colon + 1)).empty()) {
      fail(fmt::format("\"# {}\": expected \"# {} : <value>\"", c, what));
    }
    return fields(c.substr(colon + 1)).front();
  }

  int64_t integer_after_colon(std::string_view c, std::string_view what) const {
    const std::optional<int64_t> v = parse_integer(after_colon(c, what));
    if (!v || *v < 0) {
      fail(fmt::format("\"# {}\": expected a count", c));
    }
    return *v;
  }

  double number_after_colon(std::string_view c, std::string_view what) const {
    return measured(after_colon(c, what), what);
  }

  std::string_view text_;
  const std::string& source_;
  NcclTestsLog log_;
  std::optional<NcclTestsRun> run_;
  std::optional<Layout> layout_;
  int64_t line_ = 0;
  int64_t rows_ = 0;
};

}  // namespace

std::vector<std::string> NcclTestsRun::hosts() const {
  std::vector<std::string> out;
  for (const NcclTestsDevice& d : devices) {
    if (std::find(out.begin(), out.end(), d.host) == out.end()) {
      out.push_back(d.host);
    }
  }
  return out;
}

std::optional<NcclTest> nccl_test_named_in(std::string_view name) {
  std::string lower;
  for (const char c : name) {
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  // Longest spellings first, so that "reduce" inside "all_reduce" or "reduce_scatter" does not
  // count on its own.
  static constexpr std::array<std::pair<std::string_view, NcclTest>, 12> kNames = {{
      {"reduce_scatter", NcclTest::kReduceScatter},
      {"reducescatter", NcclTest::kReduceScatter},
      {"all_reduce", NcclTest::kAllReduce},
      {"allreduce", NcclTest::kAllReduce},
      {"all_gather", NcclTest::kAllGather},
      {"allgather", NcclTest::kAllGather},
      {"alltoall", NcclTest::kAllToAll},
      {"all_to_all", NcclTest::kAllToAll},
      {"sendrecv", NcclTest::kSendRecv},
      {"broadcast", NcclTest::kBroadcast},
      {"reduce", NcclTest::kReduce},
      {"send_recv", NcclTest::kSendRecv},
  }};
  std::optional<NcclTest> found;
  for (const auto& [spelling, test] : kNames) {
    const size_t at = lower.find(spelling);
    if (at == std::string::npos) {
      continue;
    }
    if (found && *found != test) {
      return std::nullopt;  // two tests named: ambiguous
    }
    found = test;
    lower.replace(at, spelling.size(), std::string(spelling.size(), ' '));
  }
  return found;
}

std::optional<std::string> nccl_version_of_code(int64_t code) {
  // nccl.h: NCCL_VERSION(X,Y,Z) is X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z after.
  if (code >= 20900 && code < 100000) {
    return fmt::format("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100);
  }
  if (code >= 2000 && code < 2900) {
    return fmt::format("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100);
  }
  return std::nullopt;
}

NcclTestsLog parse_nccl_tests_log(std::string_view text, const std::string& source) {
  if (static_cast<int64_t>(text.size()) > kMaxNcclTestsLogBytes) {
    throw InputSizeError(source, "",
                         fmt::format("larger than the {} limit on an nccl-tests log",
                                     describe_limit(kMaxNcclTestsLogBytes)));
  }
  return Parser(text, source).run();
}

NcclTestsLog read_nccl_tests_log(const std::string& path) {
  const std::string text = read_input_file(path, kMaxNcclTestsLogBytes, "an nccl-tests log");
  return parse_nccl_tests_log(text, path);
}

}  // namespace meshsim::traces
