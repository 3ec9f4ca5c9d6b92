// A measured step as a Program and a Timeline (import.h, to_timeline).
#include <algorithm>
#include <map>
#include <utility>

#include "meshsim/sim/timeline.h"
#include "meshsim/traces/import.h"

namespace meshsim::traces {

MeasuredTimeline to_timeline(const MeasuredStep& step, RankId rank) {
  MeasuredTimeline out;
  std::map<std::pair<int64_t, int64_t>, uint8_t> streams;  // (device, stream) -> stream index
  std::map<uint8_t, SimTime> stream_end;
  for (const MeasuredOp& m : step.ops) {
    const auto key = std::make_pair(m.device, m.stream);
    const auto next = static_cast<uint8_t>(std::min<size_t>(streams.size(), 255));
    const uint8_t stream = streams.try_emplace(key, next).first->second;
    Op op;
    op.name = m.name;
    op.stream = stream;
    ComputeWork w;
    w.op_class = m.op_class;
    w.dtype = Dtype::kFp32;
    op.work = w;
    const OpId id = out.program.add(std::move(op));
    OpRecord r;
    r.rank = rank;
    r.op = id;
    r.stream = stream;
    const SimTime start = SimTime::zero() + (m.start - step.start);
    const auto [it, first] = stream_end.try_emplace(stream, start);
    r.start = std::max(start, it->second);
    r.ready = r.start;
    r.end = r.start + m.duration;
    it->second = r.end;
    out.timeline.ops.push_back(r);
  }
  sort_by_completion(out.timeline.ops);  // one rank: by end, then op
  return out;
}

}  // namespace meshsim::traces
