// Output files written whole or not at all (--json, --trace, --out).
//
// An OutputFile writes to a temporary file beside `path` (same directory, short name, so the final
// rename is atomic and no file name grows past the system's limit) and commit() flushes, closes
// and renames it over `path`. Every failure (a missing or unwritable directory, a directory where
// the file should go, the disk full, a file larger than the process may write) is an OutputError
// (an InputError) on the flag, naming the file and the system's reason, and an OutputFile
// destroyed without commit() removes its temporary file: a failed run never leaves a truncated
// output, nor exits 0 with its output lost. A path that exists and is neither a regular file nor
// a directory (a pipe, /dev/stdout, /dev/null) is written in place, and "-" is standard output
// (the commands then print their text report on standard error, so that standard output holds
// the JSON alone).
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <ostream>
#include <string>

namespace meshsim::cli {

// The path that names standard output ("--json -").
inline constexpr const char* kStandardOutput = "-";

class OutputFile {
 public:
  // Opens the temporary file (or the special file); throws OutputError on `flag` when it cannot.
  OutputFile(std::string path, std::string flag);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::ostream& stream() { return stream_; }
  const std::string& path() const { return path_; }
  // Flushes, closes and renames into place; throws OutputError on `flag` when any step fails.
  void commit();
  // Stops the file at `bytes`: the write that would pass them throws InputError on `limit_flag`
  // with `advice` (a trace of more ranks than anyone can open must not fill the disk first).
  void set_limit(int64_t bytes, std::string limit_flag, std::string advice);

 private:
  [[noreturn]] void fail(const std::string& what, int error) const;

  std::string path_;
  std::string flag_;
  std::string temp_;  // empty: writing `path_` in place
  class FileBuf;      // an unbuffered-by-libc file descriptor that remembers the first errno
  std::unique_ptr<FileBuf> buf_;
  std::ostream stream_;
  bool committed_ = false;
};

// Writes `j` as indented JSON (newline-terminated) to `out` and commits it.
void write_json(OutputFile& out, const nlohmann::json& j);

// Writes `j` as indented JSON to `path` through an OutputFile. Strings that are not valid UTF-8
// (a path given on the command line, say) are written with U+FFFD in place of the bad bytes
// instead of failing after the run.
void write_json_file(const std::string& path, const nlohmann::json& j, const std::string& flag);

// j.dump() with the same replacement of invalid UTF-8.
std::string dump_json(const nlohmann::json& j, int indent = -1);

}  // namespace meshsim::cli
