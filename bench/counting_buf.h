// A streambuf that only counts the bytes written to it: benchmarks measure the writers, not I/O.
#pragma once

#include <cstdint>
#include <streambuf>

namespace meshsim::bench {

class CountingBuf : public std::streambuf {
 public:
  int64_t bytes() const { return bytes_; }

 protected:
  std::streamsize xsputn(const char* /*s*/, std::streamsize n) override {
    bytes_ += n;
    return n;
  }
  int_type overflow(int_type c) override {
    ++bytes_;
    return traits_type::not_eof(c);
  }

 private:
  int64_t bytes_ = 0;
};

}  // namespace meshsim::bench
