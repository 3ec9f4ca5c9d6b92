// read_kineto: the file (or memory), inflated on the fly when gzipped, through the splitter and
// the decoder in chunks of kChunk bytes.
#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <system_error>

#include "json_splitter.h"
#include "kineto_decode.h"
#include "meshsim/sim/error.h"
#include "meshsim/sim/json_input.h"
#include "meshsim/traces/kineto.h"

namespace meshsim::traces {

namespace {

constexpr size_t kChunk = size_t{1} << 20;

// Reads up to `n` bytes of the stored file into `buf`; returns how many (0 at the end).
using ReadFn = std::function<size_t(char* buf, size_t n)>;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// Feeds the text to `feed` in chunks, each followed by JsonSplitter::kPadding readable bytes,
// inflating it first when the stored bytes start with gzip's magic number.
class TextSource {
 public:
  TextSource(ReadFn read, std::string source, const KinetoLimits& limits)
      : read_(std::move(read)), source_(std::move(source)), limits_(limits) {}

  void run(const std::function<void(std::string_view)>& feed) {
    std::string in(kChunk, '\0');
    size_t have = fill(in.data(), in.size());
    const bool gzip = have >= 2 && static_cast<unsigned char>(in[0]) == 0x1f &&
                      static_cast<unsigned char>(in[1]) == 0x8b;
    if (!gzip) {
      std::string buf(kChunk + detail::JsonSplitter::kPadding, '\0');
      std::copy(in.data(), in.data() + have, buf.data());
      while (have > 0) {
        count_text(have);
        feed(std::string_view(buf.data(), have));
        have = fill(buf.data(), kChunk);
      }
      return;
    }
    inflate_all(in, have, feed);
  }

  int64_t stored() const { return stored_; }

 private:
  size_t fill(char* buf, size_t n) {
    size_t got = 0;
    while (got < n) {
      const size_t r = read_(buf + got, n - got);
      if (r == 0) {
        break;
      }
      got += r;
    }
    stored_ += static_cast<int64_t>(got);
    if (stored_ > limits_.max_file_bytes) {
      throw InputSizeError(source_, "",
                           fmt::format("larger than the {} limit on a trace file as stored",
                                       describe_limit(limits_.max_file_bytes)));
    }
    return got;
  }

  void count_text(size_t n) {
    text_ += static_cast<int64_t>(n);
    if (text_ > limits_.max_text_bytes) {
      throw InputSizeError(source_, "",
                           fmt::format("the trace's JSON text is larger than the {} limit",
                                       describe_limit(limits_.max_text_bytes)));
    }
  }

  void inflate_all(std::string& in, size_t have,
                   const std::function<void(std::string_view)>& feed);

  ReadFn read_;
  std::string source_;
  KinetoLimits limits_;
  int64_t stored_ = 0;
  int64_t text_ = 0;
};

struct ZStream {
  z_stream zs{};
  bool open = false;
  ~ZStream() {
    if (open) {
      inflateEnd(&zs);
    }
  }
};

void TextSource::inflate_all(std::string& in, size_t have,
                             const std::function<void(std::string_view)>& feed) {
  ZStream z;
  // inflateInit2 is a macro with an old-style cast; call the function it expands to. 15 + 32:
  // a zlib or gzip header, detected.
  if (inflateInit2_(&z.zs, 15 + 32, ZLIB_VERSION, static_cast<int>(sizeof(z_stream))) != Z_OK) {
    throw InputError(source_, "", "cannot initialise zlib to read the gzip stream");
  }
  z.open = true;
  std::string out(kChunk + detail::JsonSplitter::kPadding, '\0');
  int64_t consumed = 0;  // stored bytes inflated so far
  z.zs.next_in = reinterpret_cast<Bytef*>(in.data());
  z.zs.avail_in = static_cast<uInt>(have);
  bool ended = false;
  while (true) {
    if (z.zs.avail_in == 0) {
      have = fill(in.data(), in.size());
      if (have == 0) {
        break;
      }
      z.zs.next_in = reinterpret_cast<Bytef*>(in.data());
      z.zs.avail_in = static_cast<uInt>(have);
      if (ended) {  // another gzip member follows (cat a.gz b.gz)
        inflateReset(&z.zs);
        ended = false;
      }
    } else if (ended) {
      inflateReset(&z.zs);
      ended = false;
    }
    z.zs.next_out = reinterpret_cast<Bytef*>(out.data());
    z.zs.avail_out = static_cast<uInt>(kChunk);
    const uInt before = z.zs.avail_in;
    const int rc = inflate(&z.zs, Z_NO_FLUSH);
    consumed += before - z.zs.avail_in;
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      throw InputError(source_, fmt::format("byte {}", consumed),
                       fmt::format("corrupt gzip stream: {}",
                                   z.zs.msg != nullptr ? z.zs.msg : "zlib error"));
    }
    const size_t produced = kChunk - z.zs.avail_out;
    if (produced > 0) {
      count_text(produced);
      feed(std::string_view(out.data(), produced));
    }
    if (rc == Z_STREAM_END) {
      ended = true;
    } else if (rc == Z_BUF_ERROR && produced == 0 && z.zs.avail_in != 0) {
      throw InputError(source_, fmt::format("byte {}", consumed), "corrupt gzip stream");
    }
  }
  if (!ended) {
    throw InputError(source_, fmt::format("byte {}", consumed),
                     "truncated gzip stream (the file ends inside the compressed data)");
  }
}

RankTrace read_from(ReadFn read, const std::string& source, const KinetoLimits& limits) {
  RankTrace out;
  out.source = source;
  detail::KinetoDecoder decoder(out, limits);
  detail::JsonSplitter* splitter_ptr = nullptr;
  detail::JsonSplitter splitter(
      source, {limits.max_event_bytes, limits.max_header_bytes, limits.max_depth},
      [&decoder, &splitter_ptr](std::string_view text, int64_t index, int64_t offset) {
        decoder.event(text, index, offset, splitter_ptr->legacy_array());
      },
      [&decoder](const std::string& key, std::string_view text, int64_t offset) {
        decoder.header(key, text, offset);
      });
  splitter_ptr = &splitter;
  TextSource text(std::move(read), source, limits);
  text.run([&splitter](std::string_view chunk) { splitter.feed(chunk); });
  splitter.finish();
  if (!splitter.saw_events()) {
    throw InputError(source, "/traceEvents",
                     "missing: a PyTorch profiler trace is an object with a \"traceEvents\" "
                     "array");
  }
  out.text_bytes = splitter.bytes();
  out.inputs.shrink_to_fit();  // what growth left over (a multi-GB trace's tables are large)
  out.shapes.shrink_to_fit();
  return out;
}

}  // namespace

RankTrace read_kineto(const std::string& path, const KinetoLimits& limits) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw InputError(path, "", "is a directory, expected a trace file");
  }
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    throw InputError(path, "", "cannot open the trace file");
  }
  std::FILE* f = file.get();
  return read_from(
      [f, &path](char* buf, size_t n) {
        const size_t r = std::fread(buf, 1, n, f);
        if (r == 0 && std::ferror(f) != 0) {
          throw InputError(path, "", "cannot read the trace file");
        }
        return r;
      },
      path, limits);
}

RankTrace read_kineto_bytes(std::string_view bytes, const std::string& source,
                            const KinetoLimits& limits) {
  size_t at = 0;
  return read_from(
      [bytes, &at](char* buf, size_t n) {
        const size_t r = std::min(n, bytes.size() - at);
        std::copy(bytes.data() + at, bytes.data() + at + r, buf);
        at += r;
        return r;
      },
      source, limits);
}

std::vector<std::string> trace_files(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (!std::filesystem::exists(p, ec)) {
      throw InputError(p, "", "does not exist");
    }
    if (!std::filesystem::is_directory(p, ec)) {
      out.push_back(p);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(p, ec)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_regular_file() && (name.ends_with(".json") || name.ends_with(".json.gz"))) {
        found.push_back(entry.path().string());
      }
    }
    if (ec) {
      throw InputError(p, "", fmt::format("cannot list the directory: {}", ec.message()));
    }
    if (found.empty()) {
      throw InputError(p, "", "holds no trace files (*.json or *.json.gz)");
    }
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

}  // namespace meshsim::traces
