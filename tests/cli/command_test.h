// The harness of the end-to-end CLI tests: run the real binary (MESHSIM_BIN) through the shell in
// a fresh temp directory and look at its exit code and its combined stdout + stderr.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace meshsim::testing {

struct CommandResult {
  int exit_code = -1;  // 128 + signal when the process was killed by a signal
  std::string output;  // stdout and stderr, interleaved
};

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (const char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Whatever the exit code: no crash, no sanitizer report, no stack trace, no "internal error".
inline void expect_no_crash(const CommandResult& r) {
  using ::testing::HasSubstr;
  using ::testing::Not;
  for (const char* bad : {"internal error", "terminate called", "what():", "Segmentation fault",
                          "Aborted", "AddressSanitizer", "runtime error:", "stack trace"}) {
    EXPECT_THAT(r.output, Not(HasSubstr(bad)));
  }
}

// Every one of `phrases` in `text` (a command's output, or a file it wrote): one check each, which
// names the phrase and the caller's line. (__builtin_FILE and __builtin_LINE, which gcc and clang
// both have: clang 14 with libstdc++ has no std::source_location.)
inline void expect_has_all(const std::string& text, const std::vector<std::string>& phrases,
                           const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  const ::testing::ScopedTrace trace(file, line, "expect_has_all");
  for (const std::string& p : phrases) {
    EXPECT_THAT(text, ::testing::HasSubstr(p));
  }
}

// Exit code 2, the "meshsim: error: " prefix, every one of `words` in the message, no summary and
// no crash.
inline void expect_input_error(const CommandResult& r, const std::vector<std::string>& words) {
  using ::testing::HasSubstr;
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("meshsim: error: "));
  for (const std::string& w : words) {
    EXPECT_THAT(r.output, HasSubstr(w));
  }
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("step time")));
  expect_no_crash(r);
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  EXPECT_TRUE(f) << "cannot read " << p;
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline nlohmann::json parse_json(const std::string& text, const std::string& what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    ADD_FAILURE() << what << " is not valid JSON: " << e.what();
  }
  return {};
}

// A fresh temp directory per test, and `meshsim ARGS...` run inside it.
class CommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "meshsim-cli-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << "cannot create a temp dir";
    dir_ = pattern;
  }

  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  CommandResult meshsim(const std::vector<std::string>& args) const { return run(args, " 2>&1"); }
  // Standard output alone (standard error discarded).
  CommandResult meshsim_stdout(const std::vector<std::string>& args) const {
    return run(args, " 2>/dev/null");
  }

 private:
  CommandResult run(const std::vector<std::string>& args, const char* redirect) const {
    // Appended piece by piece: `"literal" + std::string` trips a GCC 12 -Wrestrict false positive.
    std::string command = "cd ";
    command += shell_quote(dir_.string());
    command += " && ";
    command += shell_quote(MESHSIM_BIN);
    for (const std::string& a : args) {
      command += ' ';
      command += shell_quote(a);
    }
    command += redirect;
    CommandResult r;
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) {
      ADD_FAILURE() << "popen failed: " << command;
      return r;
    }
    char buffer[4096];
    size_t n = 0;
    while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) {
      r.output.append(buffer, n);
    }
    const int status = pclose(pipe);
    if (status == -1) {
      ADD_FAILURE() << "pclose failed: " << command;
    } else if (WIFEXITED(status)) {
      r.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      r.exit_code = 128 + WTERMSIG(status);
    }
    return r;
  }

 protected:
  std::filesystem::path path(const std::string& name) const { return dir_ / name; }

  void write_file(const std::string& name, const std::string& contents) const {
    std::ofstream f(path(name), std::ios::binary);
    ASSERT_TRUE(f) << "cannot write " << path(name);
    f << contents;
  }

  void write_json(const std::string& name, const nlohmann::json& j) const {
    write_file(name, j.dump(2));
  }

  std::string read_file(const std::string& name) const { return read_text(path(name)); }

  nlohmann::json read_json(const std::string& name) const {
    return parse_json(read_file(name), name);
  }

  std::filesystem::path dir_;
};

}  // namespace meshsim::testing
