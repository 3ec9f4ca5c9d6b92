// The per-stage partition (partition.h) and its consumers agreeing on it: the stage's program
// runs exactly the partition's layers, its ledger starts with exactly their model state, and the
// closed-form OOM pre-check counts the same.
#include "meshsim/workloads/partition.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <vector>

#include "meshsim/sim/error.h"
#include "meshsim/workloads/accounting.h"
#include "meshsim/workloads/step.h"
#include "meshsim/workloads/training_memory.h"

namespace meshsim::workloads {
namespace {

std::set<int32_t> layers_run(const Program& program) {
  std::set<int32_t> out;
  for (size_t i = 0; i < program.size(); ++i) {
    if (const auto layer = program.op(OpId(static_cast<uint32_t>(i))).labels.layer) {
      out.insert(*layer);
    }
  }
  return out;
}

Bytes initial(const Program& program, MemoryCategory category) {
  Bytes total;
  for (const auto& [c, bytes] : program.initial_memory()) {
    total += c == category ? bytes : Bytes::zero();
  }
  return total;
}

// Issue 10: with llama3.2-1b on PP 3 and stage_layers {4, 6, 6}, stage 0 ran 4 layers but its
// ledger (and the OOM pre-check) started with 6 layers of weights: the memory closed form split
// the 16 layers 6/5/5 on its own.
TEST(StagePartition, UnevenStagesLedgerHoldsTheLayersTheyRun) {
  const ModelConfig m = load_model("llama3.2-1b");  // tied embeddings: the last stage keeps a copy
  ParallelPlan p;
  p.pp = 3;
  p.stage_layers = {4, 6, 6};
  p.dp = 8;
  p.zero = ZeroStage::kOptimizerStates;
  p.gbs = 48;
  p.seq = 1024;
  const StepPlan plan = plan_step(m, p);
  const ParameterCounts counts = count_parameters(m);
  const int64_t first_layer[] = {0, 4, 10};
  for (int64_t s = 0; s < 3; ++s) {
    SCOPED_TRACE(s);
    const Program& program = plan.programs[static_cast<size_t>(s)];
    const std::set<int32_t> layers = layers_run(program);
    const auto count = static_cast<int64_t>(p.stage_layers[static_cast<size_t>(s)]);
    ASSERT_EQ(static_cast<int64_t>(layers.size()), count);
    EXPECT_EQ(*layers.begin(), first_layer[s]);
    int64_t params = count * counts.layer.total();
    params += s == 0 ? counts.token_embedding : 0;
    params += s == 2 ? counts.final_norm + counts.token_embedding : 0;
    EXPECT_EQ(initial(program, MemoryCategory::kWeights), Bytes::of(2 * params));
    EXPECT_EQ(initial(program, MemoryCategory::kGradients), Bytes::of(2 * params));
    EXPECT_EQ(initial(program, MemoryCategory::kOptimizerState), Bytes::of((12 * params + 7) / 8));
    // The pre-check's closed form agrees with the ledger.
    const TrainingMemory& estimate = plan.memory_estimate[static_cast<size_t>(s)];
    EXPECT_EQ(estimate.weights, initial(program, MemoryCategory::kWeights));
    EXPECT_EQ(estimate.gradients, initial(program, MemoryCategory::kGradients));
    EXPECT_EQ(estimate.optimizer_states, initial(program, MemoryCategory::kOptimizerState));
  }
}

TEST(StagePartition, InterleavedChunksAreVirtualStages) {
  const ModelConfig m = load_model("llama3.2-1b");
  ParallelPlan p;
  p.pp = 2;
  p.vpp = 2;
  p.schedule = PipelineSchedule::kInterleaved;
  p.gbs = 4;
  p.seq = 1024;
  const std::vector<StagePartition> stages = partition_stages(m, p);
  ASSERT_EQ(stages.size(), 2u);
  ASSERT_EQ(stages[1].chunks.size(), 2u);
  EXPECT_EQ(stages[1].chunks[0].first, 4);  // virtual stage 1
  EXPECT_EQ(stages[1].chunks[1].first, 12);  // virtual stage 3
  EXPECT_EQ(stages[1].chunks[1].end, 16);
  EXPECT_EQ(stages[1].params.layers, 8);
  const StepPlan plan = plan_step(m, p);
  const std::set<int32_t> layers = layers_run(plan.programs[1]);
  EXPECT_EQ(layers, (std::set<int32_t>{4, 5, 6, 7, 12, 13, 14, 15}));
}

// Issue 10: per-layer parameters were recovered by subtracting the embedding and head from the
// rank's total and dividing by the layers; on a single stage with tied embeddings the head was
// counted as a second embedding, so every layer came out smaller by V*h/L.
TEST(StagePartition, TiedSingleStageCountsEachLayerAndTheEmbeddingOnce) {
  const ModelConfig m = load_model("llama3.2-1b");
  ParallelPlan p;
  p.seq = 1024;
  const StagePartition s = partition_stage(m, p, 0);
  const ParameterCounts counts = count_parameters(m);
  EXPECT_EQ(s.params.of(0).total(), counts.layer.total());
  EXPECT_EQ(s.params.embedding, counts.token_embedding);
  EXPECT_EQ(s.params.head, counts.final_norm);  // the LM head is the embedding
  EXPECT_EQ(s.params.total(), total_parameters(m));
}

// The vocabulary-parallel tables hold ceil(V / TP) rows per rank (Megatron pads V to TP).
TEST(StagePartition, VocabularyRowsRoundUpPerRank) {
  const ModelConfig m = load_model("gpt2-small");  // V = 50257
  ParallelPlan p;
  p.tp = 2;
  p.seq = 1024;
  const StagePartition s = partition_stage(m, p, 0);
  EXPECT_EQ(s.widths.vocab, 25129);
  EXPECT_EQ(s.params.embedding, 25129 * 768 + 1024 * 768);  // token rows + learned positions
  EXPECT_EQ(s.tokens.per_rank, 1024);
}

TEST(StagePartition, TokensOfAContextAndSequenceParallelRank) {
  const ModelConfig m = load_model("llama3-8b");
  ParallelPlan p;
  p.tp = 4;
  p.sp = true;
  p.cp = 2;
  p.mbs = 2;
  p.gbs = 2;
  p.seq = 8192;
  const StagePartition s = partition_stage(m, p, 0);
  EXPECT_EQ(s.tokens.per_rank, 2 * 8192 / 2);
  EXPECT_EQ(s.tokens.sequence, 2 * 8192 / 2 / 4);
  EXPECT_EQ(s.widths.kv_heads, 2);  // 8 KV heads over 4
}

// DeepSpeed's PipelineModule "type:transformer" partition, as deepspeed/runtime/utils.py's
// partition_balanced @ v0.6.5 computes it: the expected splits are what that function returns for
// GPTModelPipe's specs (3 before the layers, 4 after) and for bare layers, run once in Python.
TEST(Partition, DeepSpeedSplitsTheTransformerLayersAsItsPipelineModuleDoes) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(deepspeed_type_partition(70, 12, 3, 4), V({6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 4}));
  EXPECT_EQ(deepspeed_type_partition(126, 16, 3, 4),
            V({8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 6}));
  EXPECT_EQ(deepspeed_type_partition(105, 35, 3, 4), V(35, 3));    // MT-NLG's 105 over 35
  EXPECT_EQ(deepspeed_type_partition(16, 3, 3, 4), V({5, 5, 6}));  // not 6, 6, 4: the probe's
  EXPECT_EQ(deepspeed_type_partition(16, 3, 0, 0), V({5, 5, 6}));  // windows of len / stages
  EXPECT_EQ(deepspeed_type_partition(30, 4, 3, 4), V({8, 8, 8, 6}));
  EXPECT_EQ(deepspeed_type_partition(4, 3, 3, 4), V({1, 1, 2}));
  EXPECT_EQ(deepspeed_type_partition(8, 7, 3, 4), V({1, 1, 1, 1, 1, 1, 2}));
  EXPECT_EQ(deepspeed_type_partition(3, 6, 3, 4), V({1, 1, 1, 0, 0, 0}));  // stages left empty
  EXPECT_EQ(deepspeed_type_partition(5, 5, 0, 0), V(5, 1));  // as many specs as stages
  EXPECT_THROW(deepspeed_type_partition(0, 4, 3, 4), InternalError);
  for (int64_t layers = 1; layers <= 130; ++layers) {
    for (const int64_t stages : {2, 3, 5, 8, 12, 16, 35, 64}) {
      const V split = deepspeed_type_partition(layers, stages, 3, 4);
      ASSERT_EQ(static_cast<int64_t>(split.size()), stages);
      EXPECT_EQ(std::accumulate(split.begin(), split.end(), int64_t{0}), layers)
          << layers << " over " << stages;
    }
  }
}

}  // namespace
}  // namespace meshsim::workloads
