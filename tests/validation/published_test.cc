// The published-runs library (validation/include/meshsim/validation/published.h): reading the
// committed dev set strictly, the sources' FLOP conventions against hand-computed values, the
// mapping of runs to scenarios (and the runs it refuses, with the reason), the error summaries
// and the thresholds; and `meshsim validate-published` end to end on a few runs.
#include "meshsim/validation/published.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "meshsim/sim/error.h"
#include "meshsim/validation/published_facts.h"
#include "meshsim/validation/published_flops.h"
#include "meshsim/workloads/training_memory.h"
#include "published_test_util.h"
#include "validation_test_util.h"

namespace meshsim::validation::test {
namespace {

using meshsim::testing::expect_has_all;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kRuns = kSource + "/validation/published/published_runs.json";

const PublishedRun& run(const std::vector<PublishedRun>& runs, const std::string& id) {
  for (const PublishedRun& r : runs) {
    if (r.id == id) {
      return r;
    }
  }
  throw std::runtime_error("no run " + id);
}

const std::vector<PublishedRun>& dev_set() {
  static const std::vector<PublishedRun> runs = load_published_runs(kRuns);
  return runs;
}

// The scenario `r` maps to; a run that does not map fails the test, with its reason.
PublishedScenario mapped(const PublishedRun& r, const topology::Catalogue& cat) {
  PublishedMapping m = map_published_run(r, cat);
  if (const auto* no = std::get_if<NotExpressible>(&m)) {
    ADD_FAILURE() << r.id << " does not map: " << no->reason;
    return {};
  }
  return std::get<PublishedScenario>(std::move(m));
}

// The scenario the dev set's run `id` maps to on the built-in catalogue; likewise.
PublishedScenario mapped(const std::string& id) {
  static const topology::Catalogue cat = topology::Catalogue::builtin();
  return mapped(run(dev_set(), id), cat);
}

// Why `r` does not map; a run that maps fails the test.
std::string refusal(const PublishedRun& r, const topology::Catalogue& cat) {
  const PublishedMapping m = map_published_run(r, cat);
  if (const auto* no = std::get_if<NotExpressible>(&m)) {
    return no->reason;
  }
  ADD_FAILURE() << r.id << " maps, but was expected not to";
  return "";
}

TEST(PublishedLoad, ReadsTheCommittedDevSetKeepingNullsUnstated) {
  const std::vector<PublishedRun>& runs = dev_set();
  ASSERT_EQ(runs.size(), 120u);
  const PublishedRun& t2 = run(runs, "mlm2021-t2-ptdp-174.6B-768xA100");
  EXPECT_FALSE(t2.parallelism.tp.has_value());  // the source gives only TP x PP = 96
  EXPECT_EQ(t2.parallelism.dp, 8);
  const PublishedRun& mpt = run(runs, "mpt-h100_80gb-amp_bf16-30b-seq2048-256gpu-mbs8-ga1");
  EXPECT_EQ(mpt.devices, 256);
  EXPECT_EQ(mpt.batch.micro_batch, 8);
  EXPECT_EQ(mpt.measured.metric, "tokens_per_second_per_gpu");
  EXPECT_DOUBLE_EQ(mpt.measured.value, 2148);
  EXPECT_EQ(mpt.source_group(), "mpt");
}

TEST(PublishedLoad, UnknownKeysAndWrongTypesNameThePointer) {
  nlohmann::json doc = nlohmann::json::parse(std::ifstream(kRuns));
  nlohmann::json one = nlohmann::json::array({doc[0]});
  one[0]["model"]["bogus"] = 1;
  const std::string path = ::testing::TempDir() + "/published_bad.json";
  std::ofstream(path) << one.dump();
  try {
    load_published_runs(path);
    FAIL() << "accepted an unknown key";
  } catch (const InputError& e) {
    EXPECT_EQ(e.location(), "/0/model/bogus");
  }
  one = nlohmann::json::array({doc[0]});
  one[0]["parallelism"]["tp"] = "four";
  std::ofstream(path) << one.dump();
  EXPECT_THROW(load_published_runs(path), InputError);
}

TEST(PublishedFlops, Megatron2021EquationThree) {
  // GPT-7.5B of Narayanan et al. Table 1: B 512, s 2048, l 36, h 4096, V 51200.
  EXPECT_NEAR(megatron2021_iteration_flops(512, 2048, 36, 4096, 51200).count(),
              6.7184558503624696e16, 1e4);
}

TEST(PublishedFlops, MaxTextAtTheCitedCommit) {
  // MaxText's 32B configuration (global_parameter_scale 32): E 10240, 32 heads of 256, MLP
  // 32768, 32 layers, vocabulary 32768.
  const int64_t n = maxtext2023_parameters(32768, 10240, 32, 256, 32768, 32, 1);
  EXPECT_EQ(n, 32548136960);
  EXPECT_NEAR(maxtext2023_flops_per_device(n, 8, 2048, 32, 32, 256).count(), 3252388613849088.0,
              1.0);
}

TEST(PublishedMap, MptRunBecomesAnFsdpScenario) {
  const PublishedScenario s = mapped("mpt-h100_80gb-amp_bf16-30b-seq2048-256gpu-mbs8-ga1");
  EXPECT_EQ(s.cluster.device_count(), 256);
  EXPECT_EQ(s.cluster.chip.name, "h100-sxm");
  EXPECT_EQ(s.plan.dp, 256);
  EXPECT_EQ(s.plan.tp, 1);
  EXPECT_EQ(s.plan.zero, workloads::ZeroStage::kParameters);
  EXPECT_EQ(s.plan.mbs, 8);
  EXPECT_EQ(s.plan.gbs, 2048);
  EXPECT_EQ(s.plan.recompute, workloads::Recompute::kFull);
  // The benchmark yamls' MPT: learned positions and biases (MPTConfig's defaults).
  EXPECT_EQ(s.model.positions, workloads::PositionKind::kLearned);
  EXPECT_TRUE(s.model.attention_bias);
  EXPECT_EQ(s.model.d_ff, 4 * 7168);
  // The 2024 "Large Scale" table: llm-foundry main (stack fsdp), 30b with attn_impl triton;
  // Composer's DEFAULT mixed precision reduces gradients in fp32.
  EXPECT_EQ(s.plan.stack, workloads::Stack::kFsdp);
  EXPECT_EQ(s.plan.attention, workloads::AttentionKernel::kTriton);
  EXPECT_TRUE(s.plan.origins[workloads::PlanField::kAttention].given());
  EXPECT_TRUE(s.plan.grad_reduce_fp32);
  EXPECT_EQ(s.plan.model_state().gradient, 4);
  // 4194304 tokens per step at 2148 tokens/s on each of 256 GPUs.
  EXPECT_NEAR(s.measured_step.seconds(), 4194304.0 / (2148.0 * 256), 1e-9);
}

// The 2023 tables ran llm-foundry v0.3.0: the llm-foundry-2023 stack (attn_impl triton).
TEST(PublishedMap, MptTablesOf2023RunTheLlmFoundry2023Stack) {
  const PublishedScenario s = mapped("mpt-a100_80gb-amp_bf16-7b-seq16384-8gpu-mbs4-ga2");
  EXPECT_EQ(s.plan.stack, workloads::Stack::kLlmFoundry2023);
  EXPECT_FALSE(s.plan.origins[workloads::PlanField::kAttention].given());  // the stack's
}

// Megatron-LM 2021 ran with its default dropout (0.1, examples/sc21 sets none); MPT without.
TEST(PublishedMap, Megatron2021RunsTrainWithDropout) {
  const PublishedScenario mlm = mapped("mlm2021-t1-7.5B-128xA100");
  EXPECT_EQ(mlm.plan.stack, workloads::Stack::kMegatron2021);
  EXPECT_TRUE(mlm.model.dropout);
  EXPECT_THAT(mlm.assumptions, Contains(HasSubstr("dropout 0.1")));
  EXPECT_FALSE(mapped("mpt-a100_80gb-amp_bf16-7b-seq16384-8gpu-mbs4-ga2").model.dropout);
}

// Megatron-LM 2021's DDP: torch DDP (overlapped with the last backward) for the PP 1 models of
// examples/sc21, a fact of those scripts; the local DDP, the stack's default, for the pipelined
// ones, its all-reduce after the whole pass.
TEST(PublishedMap, Megatron2021PipelinedRunsReduceGradientsAfterTheBackward) {
  const PublishedScenario torch_ddp = mapped("mlm2021-t1-7.5B-128xA100");
  EXPECT_EQ(torch_ddp.plan.pp, 1);
  EXPECT_TRUE(torch_ddp.plan.origins[workloads::PlanField::kOverlapGradReduce].given());
  EXPECT_TRUE(bound_overlaps(torch_ddp).grad_reduce);
  EXPECT_THAT(torch_ddp.assumptions, Contains(HasSubstr("DDP=torch")));
  const PublishedScenario local = mapped("mlm2021-t1-310.1B-1920xA100");
  EXPECT_EQ(local.plan.pp, 16);
  EXPECT_FALSE(local.plan.origins[workloads::PlanField::kOverlapGradReduce].given());
  EXPECT_FALSE(bound_overlaps(local).grad_reduce);
  EXPECT_THAT(local.assumptions, Not(Contains(HasSubstr("DDP=torch"))));
  // Today's Megatron-Core overlaps it (the DGX Cloud runs).
  EXPECT_TRUE(bound_overlaps(mapped("dgxc2504-gpt3-175B-128xH100-bf16")).grad_reduce);
}

// Gradients reduced in fp32 as each recipe ran: NeMo's bf16_mixed keeps grad_reduce_in_fp32, its
// performance scripts turn it off for fp8 (DGX Cloud's v25.04 runs), Megatron-Bridge's for every
// performance run; torchtitan's FSDP2 reduces in float32.
TEST(PublishedMap, GradientsReducedInFp32AsTheRecipeRan) {
  EXPECT_TRUE(bound_plan(mapped("dgxc2504-nemotron4-15b-1024xH100-bf16")).grad_reduce_fp32);
  const PublishedScenario fp8 = mapped("dgxc2504-nemotron4-15b-1024xH100-fp8");
  EXPECT_FALSE(bound_plan(fp8).grad_reduce_fp32);
  EXPECT_THAT(fp8.assumptions, Contains(HasSubstr("gradients reduced in the parameters' 16 bits: "
                                                  "nemotron/setup.sh @ 741c886")));
  EXPECT_FALSE(bound_plan(mapped("dgxc2504-llama3.1-70b-2048xH100-fp8")).grad_reduce_fp32);
  EXPECT_TRUE(bound_plan(mapped("dgxc2504-llama3.1-70b-64xH100-bf16")).grad_reduce_fp32);
  EXPECT_FALSE(bound_plan(mapped("mbridge2509-llama3-8b-8xH100-fp8")).grad_reduce_fp32);
  EXPECT_TRUE(bound_plan(mapped("torchtitan-llama3-8B-128xH100-FSDP_torchcompile_Float8"))
                  .grad_reduce_fp32);
}

// Megatron-LM's README runs used its own training script, which leaves --cross-entropy-loss-fusion
// off; NeMo's recipes do not.
TEST(PublishedMap, MegatronLmsOwnRunsComputeTheLossUnfused) {
  const PublishedScenario readme = mapped("mlm-readme-h100-weak-1.7B-48xH100");
  EXPECT_FALSE(bound_plan(readme).cross_entropy_fusion);
  EXPECT_THAT(readme.assumptions, Contains(HasSubstr("cross entropy unfused: Megatron-LM's own "
                                                     "training loop")));
  EXPECT_TRUE(bound_plan(mapped("dgxc2504-llama3.1-8b-32xH100-bf16")).cross_entropy_fusion);
  EXPECT_FALSE(bound_plan(mapped("mlm2021-t1-7.5B-128xA100")).cross_entropy_fusion);
}

// Multi-slice MaxText runs: the slices joined by DCN, FSDP inside each slice, data parallel across.
// A GPT's LM head stays tied (Megatron's default) unless the source's own parameter count is
// clearly the untied one: Megatron-LM's README names its weak-scaling models by their untied
// counts (7.1B: 6.60 B tied, 7.13 B untied); Narayanan et al. count the embedding once (7.5B: 7.47
// tied, 7.68 untied); "175B" cannot tell 174.6 from 175.2.
TEST(PublishedMap, GptHeadUntiedWhereTheStatedCountIsTheUntiedOne) {
  const PublishedScenario readme = mapped("mlm-readme-h100-weak-7.1B-96xH100");
  EXPECT_FALSE(readme.model.tied_embeddings);
  EXPECT_THAT(readme.assumptions, Contains(HasSubstr("the untied count (7.13 B)")));
  EXPECT_TRUE(mapped("mlm2021-t1-7.5B-128xA100").model.tied_embeddings);
  EXPECT_TRUE(mapped("dgxc2504-gpt3-175B-128xH100-bf16").model.tied_embeddings);
  PublishedRun r = run(dev_set(), "mlm-readme-h100-weak-7.1B-96xH100");
  r.model.params_b.reset();
  EXPECT_TRUE(mapped(r, topology::Catalogue::builtin()).model.tied_embeddings);
}

// torchtitan's asyncTP column is its micro-pipelined TP (enable_async_tensor_parallel): each
// all-gather before a column-parallel GEMM and reduce-scatter after a row-parallel one overlaps
// the GEMM's pieces, as the TP overlap models it; its other runs keep TP's plain collectives.
TEST(PublishedMap, TorchtitanAsyncTpIsTpCommunicationOverlap) {
  const PublishedScenario async_tp = mapped("torchtitan-asynctp-llama3-70B-256xH100-bf16-asyncTP");
  EXPECT_EQ(async_tp.plan.tp, 8);
  EXPECT_TRUE(async_tp.plan.overlap.tensor_parallel);
  EXPECT_THAT(async_tp.assumptions, Contains(HasSubstr("enable_async_tensor_parallel")));
  PublishedRun vanilla = run(dev_set(), "torchtitan-asynctp-llama3-70B-256xH100-bf16-asyncTP");
  vanilla.location = "table 'Llama3 70b on 256 H100s', row 'bf16', column 'vanilla TP'";
  EXPECT_FALSE(mapped(vanilla, topology::Catalogue::builtin()).plan.overlap.tensor_parallel);
}

TEST(PublishedMap, MultiSliceRunsShardInsideASlice) {
  const PublishedScenario s = mapped("maxtext-v5e-16B-2xv5e-256");
  EXPECT_EQ(s.cluster.slices, 2);
  EXPECT_EQ(s.plan.fsdp * 2, s.plan.dp);
  EXPECT_THAT(s.assumptions, Contains(HasSubstr("2 slices: FSDP inside each slice")));
}

// MaxText's default decoder at the cited commit is a parallel block (models.py DecoderLayer):
// one norm, attention and MLP side by side; with TP its gather and reduction happen once a layer.
TEST(PublishedMap, MaxTextDecoderIsAParallelBlock) {
  const PublishedScenario s = mapped("maxtext-v5e-128B-4xv5e-256");
  EXPECT_TRUE(s.model.parallel_blocks);
  EXPECT_EQ(s.model.norms_per_layer, 1);
  EXPECT_EQ(s.plan.tp, 16);
  EXPECT_THAT(s.assumptions, Contains(HasSubstr("MaxText's parallel block")));
}

// NeMo 24.07's performance table does not state GPT-3's vocabulary; the launcher's gpt3 configs
// (launcher_scripts/conf/training/gpt3/*.yaml @ 24.07) set the GPT2BPETokenizer, padded to
// 128 x TP, and dropout 0.1. Another framework's GPT-3 without a vocabulary stays refused.
TEST(PublishedMap, NeMoLauncherGpt3TakesItsConfigsVocabularyAndDropout) {
  const topology::Catalogue cat = topology::Catalogue::builtin();
  PublishedRun r = run(dev_set(), "nemo2407-gpt3-5b-64xH100-fp8");
  ASSERT_FALSE(r.model.vocab.has_value());
  const PublishedMapping m = map_published_run(r, cat);
  ASSERT_TRUE(std::holds_alternative<PublishedScenario>(m));
  const PublishedScenario& s = std::get<PublishedScenario>(m);
  EXPECT_EQ(s.model.vocab_size, 50304);  // 50257 up to a multiple of 128
  EXPECT_TRUE(s.model.dropout);
  EXPECT_THAT(s.assumptions, Contains(HasSubstr("GPT2BPETokenizer")));
  // At TP 4 the padding multiple is 512: 50688.
  r.parallelism.tp = 4;
  r.parallelism.dp = 16;
  const PublishedMapping tp4 = map_published_run(r, cat);
  ASSERT_TRUE(std::holds_alternative<PublishedScenario>(tp4));
  EXPECT_EQ(std::get<PublishedScenario>(tp4).model.vocab_size, 50688);
  r.framework = "Megatron-LM";
  const PublishedMapping other = map_published_run(r, cat);
  ASSERT_TRUE(std::holds_alternative<NotExpressible>(other));
  EXPECT_THAT(std::get<NotExpressible>(other).reason, HasSubstr("vocabulary"));
}

// MaxText's remat_policy "minimal" is JAX's checkpoint_dots_with_no_batch_dims: meshsim's dots
// policy (weight matmul outputs kept, the rest re-run), not Megatron's selective recompute.
TEST(PublishedMap, MaxTextMinimalRematIsTheDotsPolicy) {
  EXPECT_EQ(mapped("maxtext-v5p-32B-1xv5p-128").plan.recompute, workloads::Recompute::kDots);
}

// Llama 3.1 405B's 126 layers over pp 8 x vpp 8: Megatron-Core counts the embedding and the loss
// as a layer each, so 64 virtual stages of 2 layers but 1 on the first and the last.
TEST(PublishedMap, MegatronCountsEmbeddingAndLossInAnUnevenSplit) {
  const PublishedScenario s = mapped("dgxc2504-llama3.1-405b-1024xH100-bf16");
  ASSERT_EQ(s.plan.stage_layers.size(), 64u);
  EXPECT_EQ(s.plan.stage_layers.front(), 1);
  EXPECT_EQ(s.plan.stage_layers.back(), 1);
  EXPECT_EQ(std::count(s.plan.stage_layers.begin(), s.plan.stage_layers.end(), 2), 62);
  EXPECT_THAT(s.assumptions, Contains(HasSubstr("account_for_embedding/loss_in_pipeline_split")));
  // 126 layers over pp 9 x vpp 7 divide: no uneven split is assumed.
  EXPECT_TRUE(mapped("dgxc2411-llama3.1-405b-576xH100-bf16").plan.stage_layers.empty());
}

// DeepSeek-V3 on 1024 H100s (Megatron-Bridge 25.09): its pipeline layout "Et|(tt|)*30mL" is 32
// virtual stages of 1, 30 x 2 and 0 layers (the last runs the MTP module and the loss), EP 64.
TEST(PublishedMap, DeepSeekV3RunsWithItsPipelineLayout) {
  const PublishedScenario s = mapped("mbridge2509-deepseekv3dropless-1024xH100-fp8");
  ASSERT_EQ(s.plan.stage_layers.size(), 32U);
  EXPECT_EQ(s.plan.stage_layers.front(), 1);
  EXPECT_EQ(s.plan.stage_layers[1], 2);
  EXPECT_EQ(s.plan.stage_layers[30], 2);
  EXPECT_EQ(s.plan.stage_layers.back(), 0);
  EXPECT_EQ(s.plan.ep, 64);
  EXPECT_EQ(s.plan.dp, 64);
  // expert_tensor_parallel_size=1 (BASE_DEEPSEEK_V3_CONFIG): EP 64 x ETP 1 x EDP 2 x PP 8.
  EXPECT_EQ(s.plan.expert_tp(), 1);
  EXPECT_EQ(s.plan.expert_grad_group(), 2);
  EXPECT_EQ(s.plan.moe_tokens(), 4096 / 2);
  // moe_flex_dispatcher_backend="hybridep" over DGX H100 nodes of 8; n_group 8, topk_group 4.
  EXPECT_EQ(s.plan.moe_dispatcher, workloads::MoeDispatcher::kFlex);
  EXPECT_EQ(s.plan.node_ranks, 8);
  EXPECT_EQ(s.model.moe->routing_groups, 8);
  EXPECT_EQ(s.model.moe->routing_group_topk, 4);
  ASSERT_TRUE(s.model.moe.has_value());
  EXPECT_EQ(s.model.moe->num_experts, 256);
  EXPECT_EQ(s.model.moe->first_dense_layers, 3);
  EXPECT_TRUE(s.model.mla.has_value());
  EXPECT_EQ(s.model.mtp_layers, 1);
  EXPECT_EQ(s.plan.recompute, workloads::Recompute::kSelective);
  EXPECT_THAT(s.plan.recompute_modules,
              ::testing::ElementsAre(workloads::RecomputeModule::kMlaUpProj,
                                     workloads::RecomputeModule::kMlp));
  EXPECT_THAT(s.assumptions, Contains(HasSubstr("selective recompute of the modules")));
  EXPECT_THAT(s.assumptions, Not(Contains(HasSubstr("no activation recompute"))));
}

// DGX Cloud Benchmarking v25.04 lists Nemotron-4 340B's VP as "NA", but its launch.sh passes
// -vp 12: the run maps interleaved, 96 layers over pp 8 x vpp 12, saying where 12 comes from.
// The same record cited at another commit is not covered by that script and is refused.
TEST(PublishedMap, VirtualPipelineSizeFromTheLaunchScriptOfTheCitedCommit) {
  const topology::Catalogue cat = topology::Catalogue::builtin();
  const PublishedRun& r = run(dev_set(), "dgxc2504-nemotron4-340b-256xH100-bf16");
  ASSERT_FALSE(r.parallelism.vpp.has_value());
  const PublishedScenario s = mapped(r, cat);
  EXPECT_EQ(s.plan.pp, 8);
  EXPECT_EQ(s.plan.vpp, 12);
  EXPECT_EQ(s.plan.schedule, workloads::PipelineSchedule::kInterleaved);
  EXPECT_THAT(s.assumptions,
              Contains(HasSubstr("virtual pipeline size 12: not in the record, but "
                                 "nemotron/launch.sh @ 741c886")));

  PublishedRun elsewhere = r;
  elsewhere.citation = "NVIDIA/dgxc-benchmarking nemotron/README.md @ 68eaf7e (release v25.05)";
  EXPECT_THAT(refusal(elsewhere, cat), HasSubstr("virtual pipeline size is not stated"));
}

// DGX Cloud Benchmarking v24.11.1's PaxML tables say only "FSDP + DP"; its configure.sh sets
// DCN_MESH_SHAPE [nodes / FSDP, FSDP, 1] over ICI [1, 8, 1] (FSDP 1 for 5B, 16 for 175B) and its
// paxml_mod_configs.py the remat policy: HSDP over 8 and 128 devices, dots and qkv_out_proj.
TEST(PublishedMap, PaxmlShardGroupAndRematFromItsScripts) {
  const topology::Catalogue cat = topology::Catalogue::builtin();
  const PublishedScenario small = mapped(run(dev_set(), "dgxc2411-paxml-gpt5B-16xH100-fp8"), cat);
  EXPECT_EQ(small.plan.dp, 16);
  EXPECT_EQ(small.plan.fsdp, 8);
  EXPECT_EQ(small.plan.zero_replicas(), 2);
  EXPECT_EQ(small.plan.recompute, workloads::Recompute::kDots);
  EXPECT_THAT(small.assumptions, Contains(HasSubstr("SAVE_DOT_ONLY")));
  EXPECT_EQ(small.plan.stack, workloads::Stack::kPaxml);
  EXPECT_THAT(small.assumptions, Not(Contains(HasSubstr("MaxText's default remat_policy"))));

  const PublishedScenario large =
      mapped(run(dev_set(), "dgxc2411-paxml-gpt175B-512xH100-fp8"), cat);
  EXPECT_EQ(large.plan.fsdp, 128);
  EXPECT_EQ(large.plan.zero_replicas(), 4);
  EXPECT_EQ(large.plan.recompute, workloads::Recompute::kQkvOutProj);
  EXPECT_TRUE(large.plan.recompute_modules.empty());
  EXPECT_THAT(large.assumptions, Contains(HasSubstr("SAVE_QKV_OUT_PROJ")));
  // The published run trained on 80 GB H100s: under its policy the model state and the saved
  // activations fit the chip (they did not while the policy was costed as Megatron's selective
  // core_attn and mlp, which also keep the norms' inputs and the attention output).
  EXPECT_LT(workloads::training_memory(large.model, large.plan).total(),
            large.cluster.chip.hbm_capacity);
  workloads::ParallelPlan megatron_like = large.plan;
  megatron_like.recompute = workloads::Recompute::kSelective;
  megatron_like.recompute_modules = {workloads::RecomputeModule::kCoreAttn,
                                     workloads::RecomputeModule::kMlp};
  EXPECT_GT(workloads::training_memory(large.model, megatron_like).total(),
            large.cluster.chip.hbm_capacity);

  // Without a script at the cited commit the split stays unknown.
  PublishedRun elsewhere = run(dev_set(), "dgxc2411-paxml-gpt5B-16xH100-fp8");
  elsewhere.citation = "NVIDIA/dgxc-benchmarking paxml/README_5b.md @ 8f5cbb3 (release v25.02)";
  EXPECT_THAT(refusal(elsewhere, cat), HasSubstr("split between FSDP and data parallelism"));
}

TEST(PublishedMap, RefusesWhatItCannotExpressAndSaysWhy) {
  const topology::Catalogue cat = topology::Catalogue::builtin();
  const auto reason = [&](const std::string& id) {
    const PublishedMapping m = map_published_run(run(dev_set(), id), cat);
    EXPECT_TRUE(std::holds_alternative<NotExpressible>(m)) << id;
    return std::holds_alternative<NotExpressible>(m) ? std::get<NotExpressible>(m).reason : "";
  };
  EXPECT_THAT(reason("mlm-readme-h100-strong-177B-96xH100"),
              HasSubstr("the parallel layout (tp, pp, dp) is not stated"));
  EXPECT_THAT(reason("nemo-longseq-llama3-8b-8k-8xB200"), HasSubstr("do not multiply"));
  // Without the source's micro-batch, 64 sequences over dp 8 leave it open.
  PublishedFacts no_launcher = PublishedFacts::builtin();
  std::erase_if(no_launcher.source_facts, [](const SourceFact& f) {
    return f.set.micro_batch && f.source.find("NeMo-Framework-Launcher") != std::string::npos;
  });
  const PublishedMapping open =
      map_published_run(run(dev_set(), "nemo-longseq-llama2-7b-64k-64xH100"), cat, no_launcher);
  ASSERT_TRUE(std::holds_alternative<NotExpressible>(open));
  EXPECT_THAT(std::get<NotExpressible>(open).reason, HasSubstr("micro-batch size"));
}

// NeMo's performance tables count TFLOP/s with nemo/utils/flops_formulas.py; for Llama 2 that is
// gbs s L h^2 (12 + 12 g/a + 18 f/h + 12 s/h + 6 V / (L h)), written out here, and the step is
// those FLOPs over the table's TFLOP/s per GPU times the GPUs. The micro-batch is the launcher
// config's 1.
TEST(PublishedMap, NemoLongSequenceTablesCountFlopsAsNemoDoes) {
  const topology::Catalogue cat = topology::Catalogue::builtin();
  const PublishedRun r = run(dev_set(), "nemo-longseq-llama2-7b-64k-64xH100");
  const PublishedScenario s = mapped(r, cat);
  const double gbs = 64, seq = 65536, layers = 32, h = 4096, heads = 32, groups = 32, ffn = 11008,
               vocab = 32000;
  const double flops =
      gbs * seq * layers * h * h *
      (12 + 12 * groups / heads + 18 * ffn / h + 12 * seq / h + 6 * vocab / (layers * h));
  EXPECT_NEAR(s.measured_step.seconds(), flops / (574e12 * 64), 1e-9 * s.measured_step.seconds());
  EXPECT_EQ(s.plan.mbs, 1);
  EXPECT_EQ(s.plan.cp, 2);
  EXPECT_THAT(s.conversion, HasSubstr("flops_formulas.py"));
}

// llm-foundry's FSDP columns: a sharding strategy other than the stated ZeRO stage's, a hybrid
// one, or activation CPU offload is refused with the reason, not simulated as something else.
TEST(PublishedMap, ComposerFsdpColumnsMustBeWhatIsModelled) {
  const topology::Catalogue cat = topology::Catalogue::builtin();
  const PublishedRun base = run(dev_set(), "mpt-a100_40gb-bf16-3b-seq2048-16gpu-mbs5-ga1");
  ASSERT_EQ(mapped(base, cat).plan.zero, workloads::ZeroStage::kParameters);  // FULL_SHARD
  const auto with_notes = [&](const std::string& from, const std::string& to) {
    PublishedRun r = base;
    const size_t at = r.parallelism.notes.find(from);
    EXPECT_NE(at, std::string::npos) << r.parallelism.notes;
    r.parallelism.notes.replace(at, from.size(), to);
    return r;
  };
  EXPECT_THAT(refusal(with_notes("offload=False", "offload=True"), cat),
              HasSubstr("offloads activations to the CPU"));
  const std::string hybrid = refusal(with_notes("FULL_SHARD", "HYBRID_SHARD"), cat);
  expect_has_all(hybrid, {"sharding_strategy is not modelled",
                          "(the notes: \"sharding_strategy=HYBRID_SHARD\")"});
  EXPECT_THAT(refusal(with_notes("FULL_SHARD", "SHARD_GRAD_OP"), cat),
              HasSubstr("sharding_strategy=SHARD_GRAD_OP is ZeRO stage 2, but the run maps to "
                        "stage 3"));
}

// NVIDIA's GB200 tables run 64 GPUs: 16 trays of one NVL72 rack, one NVLink domain of 64. More
// than a rack maps as Megatron-Bridge's launcher places it, or else only as whole racks.
TEST(PublishedMap, Gb200RunsOfPartOfARackAreOneNvlinkDomain) {
  const topology::Catalogue cat = topology::Catalogue::builtin();
  PublishedRun r = run(dev_set(), "mbridge2509-llama3-70b-64xGB200-fp8");
  // Megatron-Bridge's 70B GB200 FP8 recipe offloads 40 of the 80 layers' activations.
  EXPECT_EQ(mapped(r, cat).plan.offload_layers, 40);
  {
    // The table's other configuration (TP 2, PP 4, VP 5, no FSDP) is not the recipe's plan.
    PublishedRun other = r;
    other.parallelism.tp = 2;
    other.parallelism.pp = 4;
    other.parallelism.vpp = 5;
    other.parallelism.dp = 8;
    other.parallelism.fsdp = false;
    EXPECT_EQ(mapped(other, cat).plan.offload_layers, 0);
  }
  r.model.layers = 32;  // another model: no recipe, no offloading
  r.model.hidden = 4096;
  r.model.ffn = 14336;
  r.model.heads = 32;
  const PublishedScenario s = mapped(r, cat);
  EXPECT_EQ(s.cluster.device_count(), 64);
  EXPECT_EQ(s.cluster.scale_up_domain_size(), 64);
  EXPECT_EQ(s.cluster.scale_up_domains(), 1);
  EXPECT_THAT(s.assumptions, Contains(HasSubstr("16 trays of one NVL72 rack")));
  EXPECT_EQ(s.plan.offload_layers, 0);
  // 32 trays: Megatron-Bridge's launcher asks Slurm for segments of 16 trays, two NVLink domains
  // of 64; another framework's split is not stated.
  r.devices = 128;
  r.parallelism.dp = 128;
  r.batch.sequences = 256;
  const PublishedScenario segments = mapped(r, cat);
  EXPECT_EQ(segments.cluster.scale_up_domain_size(), 64);
  EXPECT_EQ(segments.cluster.scale_up_domains(), 2);
  EXPECT_THAT(segments.assumptions, Contains(HasSubstr("Slurm segments of 16")));
  const std::string framework = r.framework;
  r.framework = "NeMo 24.09";
  EXPECT_THAT(refusal(r, cat), HasSubstr("how they split between the racks is not stated"));
  r.framework = framework;
  r.devices = 144;
  r.parallelism.dp = 144;
  r.batch.sequences = 288;
  EXPECT_EQ(mapped(r, cat).cluster.scale_up_domains(), 2);
}

// The FP8 recipe: current scaling where the record says FP8-CS, torchao's row-wise where it says
// float8-rowwise, MXFP8 costed as one cast pass and said so, otherwise the stack's recipe, said so
// too.
TEST(PublishedMap, Fp8RecipeAsStatedOrSaidToBeTheStacks) {
  const topology::Catalogue cat = topology::Catalogue::builtin();
  PublishedRun r = run(dev_set(), "mbridge2511-llama3-8b-8xB200-fp8-cs");
  const PublishedScenario cs = mapped(r, cat);
  EXPECT_EQ(cs.plan.fp8_scaling, workloads::Fp8Scaling::kCurrent);
  EXPECT_TRUE(cs.plan.origins[workloads::PlanField::kFp8Recipe].given());
  r.precision = "MXFP8";
  const PublishedScenario mx = mapped(r, cat);
  EXPECT_FALSE(mx.plan.origins[workloads::PlanField::kFp8Recipe].given());
  EXPECT_THAT(mx.assumptions, Contains(HasSubstr("MXFP8 block scaling")));
  r.precision = "fp8";
  EXPECT_THAT(mapped(r, cat).assumptions, Contains(HasSubstr("FP8 recipe of the framework")));
  const PublishedScenario rowwise =
      mapped(run(dev_set(), "torchtitan-asynctp-llama3-70B-256xH100-float8-rowwise-asyncTP"), cat);
  EXPECT_EQ(rowwise.plan.fp8_scaling, workloads::Fp8Scaling::kRowwise);
  EXPECT_TRUE(rowwise.plan.origins[workloads::PlanField::kFp8Recipe].given());
  // Tensor-wise is the stack's own recipe (fsdp-compile: current scaling), applied with it.
  const PublishedScenario tensorwise =
      mapped(run(dev_set(), "torchtitan-asynctp-llama3-8B-64xH100-float8-tensorwise-asyncTP"), cat);
  EXPECT_FALSE(tensorwise.plan.origins[workloads::PlanField::kFp8Recipe].given());
}

// Mixtral and Qwen3 MoE records: the routed experts on every layer (their config.json), EP as
// stated; the dispatcher assumed only while the EP group stays inside one NVLink domain.
TEST(PublishedMap, MixtralAndQwen3MoeRouteEveryLayer) {
  const topology::Catalogue cat = topology::Catalogue::builtin();
  PublishedRun r = run(dev_set(), "dgxc2504-llama3.1-8b-32xH100-bf16");
  r.model.name = "Mixtral 8x7B";
  r.model.moe = true;
  r.model.experts = 8;
  r.model.top_k = 2;
  r.model.expert_ffn = 14336;
  r.model.vocab = 32000;
  r.model.seq_len = 4096;
  r.devices = 64;
  r.parallelism = {};
  r.parallelism.tp = 1;
  r.parallelism.pp = 4;
  r.parallelism.ep = 8;
  r.parallelism.vpp = 8;
  r.batch.sequences = 256;
  const PublishedScenario s = mapped(r, cat);
  EXPECT_EQ(s.model.architecture, workloads::Architecture::kMixtral);
  ASSERT_TRUE(s.model.moe.has_value());
  EXPECT_EQ(s.model.moe->num_experts, 8);
  EXPECT_EQ(s.model.moe->experts_per_token, 2);
  EXPECT_EQ(s.model.moe->num_shared_experts, 0);
  EXPECT_EQ(s.model.moe->first_dense_layers, 0);
  EXPECT_EQ(s.model.num_kv_heads, 8);
  EXPECT_EQ(s.plan.ep, 8);
  EXPECT_EQ(s.plan.moe_dispatcher, workloads::MoeDispatcher::kAllToAll);
  EXPECT_THAT(s.assumptions, Contains(HasSubstr("one NVLink domain")));

  // With TP 2 the EP group of 8 spans 16 GPUs, leaving the 8-GPU node: the dispatcher must be
  // stated.
  r.parallelism.tp = 2;
  EXPECT_THAT(refusal(r, cat), HasSubstr("dispatcher is not stated"));
  r.parallelism.notes = "moe_token_dispatcher_type flex (HybridEP)";
  EXPECT_EQ(mapped(r, cat).plan.moe_dispatcher, workloads::MoeDispatcher::kFlex);
  r.parallelism.ep.reset();
  EXPECT_THAT(refusal(r, cat), HasSubstr("expert-parallel degree"));

  // Qwen3-30B-A3B: head_dim 128 over a 2048-wide model, QK norm.
  r.model.name = "Qwen3-30B-A3B";
  r.model.layers = 48;
  r.model.hidden = 2048;
  r.model.heads = 32;
  r.model.kv_heads = 4;
  r.model.experts = 128;
  r.model.top_k = 8;
  r.model.expert_ffn = 768;
  r.parallelism.ep = 8;
  r.parallelism.tp = 1;
  r.parallelism.pp = 1;
  r.parallelism.vpp.reset();
  const workloads::ModelConfig qwen = mapped(r, cat).model;
  EXPECT_EQ(qwen.architecture, workloads::Architecture::kQwen3Moe);
  EXPECT_EQ(qwen.head_dim, 128);
  EXPECT_TRUE(qwen.qk_norm);
  ASSERT_TRUE(qwen.moe.has_value());
  EXPECT_EQ(qwen.moe->num_experts, 128);

  r.model.name = "QWEN3_235B_a22B (tokendrop)";  // as NVIDIA's tables write it
  EXPECT_EQ(mapped(r, cat).model.architecture, workloads::Architecture::kQwen3Moe);

  // Any other MoE stays out, saying why: Qwen3-Next has linear-attention layers and a shared
  // expert.
  r.model.name = "Qwen3-Next-80B-A3B";
  EXPECT_THAT(refusal(r, cat), HasSubstr("shared experts"));
  r.model.name = "Llama 4 Maverick";
  EXPECT_THAT(refusal(r, cat), HasSubstr("shared experts"));
}

// A Llama record without its KV heads takes those of Meta's config.json for the model it names;
// a Llama whose attention no config gives is refused, not assumed multi-head.
TEST(PublishedMap, LlamaKvHeadsFromMetasConfigsWhenUnstated) {
  const topology::Catalogue cat = topology::Catalogue::builtin();
  PublishedRun r = run(dev_set(), "dgxc2504-llama3.1-70b-64xH100-bf16");
  r.model.kv_heads.reset();
  EXPECT_EQ(mapped(r, cat).model.num_kv_heads, 8);
  r.model.name = "Llama 2 70B";
  EXPECT_EQ(mapped(r, cat).model.num_kv_heads, 8);
  r.model.name = "Llama-2-13b";
  const PublishedScenario mha = mapped(r, cat);
  EXPECT_EQ(mha.model.num_kv_heads, mha.model.num_heads);
  EXPECT_THAT(mha.assumptions, Contains(HasSubstr("multi-head")));
  r.model.name = "LLaMA 30B";  // the first Llama, and "3" is not Llama 3
  r.model.arch_notes = "SwiGLU";
  EXPECT_THAT(refusal(r, cat), HasSubstr("KV heads is not stated"));
  r.model.kv_heads = 4;  // stated: taken as it is
  EXPECT_EQ(mapped(r, cat).model.num_kv_heads, 4);
}

// Every chip of the collection's hardware.json that has a cluster preset maps to it: H200 to the
// DGX H200, TPU v6e and v3 slices to their torus (Google's slice topologies).
TEST(PublishedMap, H200AndTpuV6eRunsHaveTheirPresets) {
  const topology::Catalogue cat = topology::Catalogue::builtin();
  PublishedRun h = run(dev_set(), "dgxc2504-llama3.1-70b-64xH100-bf16");
  h.hardware_key = "H200-SXM-141GB";
  const PublishedScenario gpu = mapped(h, cat);
  EXPECT_EQ(gpu.cluster.chip.name, "h200");
  EXPECT_EQ(gpu.cluster.device_count(), 64);

  PublishedRun t = run(dev_set(), "maxtext-v5e-32B-1xv5e-256");
  t.hardware_key = "TPU-v6e (Trillium)";
  const PublishedScenario tpu = mapped(t, cat);
  EXPECT_EQ(tpu.cluster.chip.name, "tpu-v6e");
  EXPECT_EQ(tpu.cluster.device_count(), 256);

  // A 128-chip v5e slice is 8 x 16; no slice has 96 chips.
  t.hardware_key = "TPU-v5e";
  t.intra_slice = "v5litepod-128 = 128 chips";
  t.devices = 128;
  t.parallelism.dp = 128;
  t.batch.sequences = 128;
  const PublishedScenario half = mapped(t, cat);
  EXPECT_EQ(half.cluster.device_count(), 128);
  EXPECT_EQ(half.cluster.torus_shape, (std::vector<int64_t>{8, 16}));
  t.intra_slice = "v5litepod-96 = 96 chips";
  t.devices = 96;
  EXPECT_THAT(refusal(t, cat), HasSubstr("no torus for a 96-chip"));
  // 512 chips are a 16 x 32 slice of v3's 32 x 32 pod, more than a v5e pod holds.
  t.intra_slice = "v5litepod-512 = 512 chips";
  t.devices = 512;
  t.parallelism.dp = 512;
  t.batch.sequences = 512;
  EXPECT_THAT(refusal(t, cat), HasSubstr("expected at most 16: a tpu-v5e pod is a 16x16 torus"));
  t.hardware_key = "TPU-v3";
  t.intra_slice = "v3-1024 = 512 chips";
  const PublishedScenario v3 = mapped(t, cat);
  EXPECT_EQ(v3.cluster.chip.name, "tpu-v3");
  EXPECT_EQ(v3.cluster.torus_shape, (std::vector<int64_t>{16, 32}));
}

TEST(PublishedReport, SummariesUseNearestRankPercentiles) {
  const ErrorSummary s = summarize({-0.3, 0.1, -0.05, 0.2, -0.1, 0.0, 0.05, -0.02, 0.01, 0.5});
  EXPECT_EQ(s.points, 10u);
  EXPECT_NEAR(s.median_abs, 0.075, 1e-12);     // |e| sorted: ..., 0.05, 0.1, ...
  EXPECT_NEAR(s.p90_abs, 0.3, 1e-12);          // 9th of 10
  EXPECT_NEAR(s.median_signed, 0.005, 1e-12);  // between 0.0 and 0.01
  EXPECT_EQ(summarize({}).points, 0u);
}

TEST(PublishedReport, ThresholdViolationsNameTheLimit) {
  PublishedReport r;
  r.overall = summarize({0.1, -0.2, 0.3});
  PublishedThresholds t{0.25, 0.5, 0.2, 0.1, 0.1};
  EXPECT_TRUE(threshold_violations(r, t).empty());
  t.max_median_abs = 0.15;
  const std::vector<std::string> v = threshold_violations(r, t);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_THAT(v[0], HasSubstr("median |error|"));
}

class PublishedCommandTest : public ValidateTest {};

TEST_F(PublishedCommandTest, RunsEndToEndOnAFewPoints) {
  nlohmann::json doc = nlohmann::json::parse(std::ifstream(kRuns));
  nlohmann::json few = nlohmann::json::array();
  for (const nlohmann::json& r : doc) {
    const std::string id = r["id"];
    if (id == "mpt-a100_80gb-amp_bf16-3b-seq2048-8gpu-mbs10-ga2" ||
        id == "dgxc2504-llama3.1-8b-32xH100-bf16" || id == "maxtext-v5p-32B-1xv5p-128" ||
        id == "maxtext-v5e-16B-2xv5e-256" || id == "mlm-readme-h100-strong-177B-96xH100") {
      few.push_back(r);
    }
  }
  ASSERT_EQ(few.size(), 5u);
  // A configuration meshsim finds out of memory (Llama 3.1 8B's record with 10 times the layers,
  // 80B parameters with their optimizer state over 16 data-parallel ranks): reported as such, not
  // scored as a prediction.
  nlohmann::json oom = *std::find_if(few.begin(), few.end(), [](const nlohmann::json& r) {
    return r["id"] == "dgxc2504-llama3.1-8b-32xH100-bf16";
  });
  oom["id"] = "llama-80b-oom";
  oom["model"]["layers"] = 320;
  few.push_back(oom);
  // The 2023 MPT stack on GB200 maps, but its attention kernel (the Triton port) was never
  // measured there: meshsim refuses that scenario, and the other runs go on.
  nlohmann::json gb200 = *std::find_if(few.begin(), few.end(), [](const nlohmann::json& r) {
    return r["id"] == "mpt-a100_80gb-amp_bf16-3b-seq2048-8gpu-mbs10-ga2";
  });
  gb200["id"] = "mpt-3b-on-gb200";
  gb200["hardware"]["hardware_key"] = "GB200 (B200 GPU in GB200 NVL72)";
  few.push_back(gb200);
  write_json("few.json", few);
  const CommandResult r = meshsim({"validate-published", "few.json", "--json", "p.json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_has_all(
      r.output,
      {"7 runs, 4 simulated, 1 out of memory in meshsim (not scored), 2 not expressible",
       "mlm-readme-h100-strong-177B-96xH100: the parallel layout",
       "out of memory in meshsim, not scored (1):\n  llama-80b-oom: ",
       "mpt-3b-on-gb200: meshsim refuses the scenario", "no measurements of triton attention"});
  const nlohmann::json j = read_json("p.json");
  ASSERT_EQ(j["points"].size(), 4u);
  ASSERT_EQ(j["out_of_memory"].size(), 1u);
  EXPECT_GT(j["out_of_memory"][0]["peak_memory_bytes"].get<double>(),
            j["out_of_memory"][0]["memory_capacity_bytes"].get<double>());
  for (const nlohmann::json& p : j["points"]) {
    EXPECT_GT(p["simulated_step_s"].get<double>(), 0);
    EXPECT_NEAR(p["error"].get<double>(),
                p["simulated_step_s"].get<double>() / p["measured_step_s"].get<double>() - 1,
                1e-12);
    // Where the step goes, by class: GEMMs and attention ran, nothing took longer than the step
    // on its own (kernel times of one rank; the exposed communication adds to compute).
    const nlohmann::json& by_class = p["time_by_op_class_s"];
    EXPECT_GT(by_class["matmul"].get<double>(), 0) << p["id"];
    EXPECT_GT(by_class["attention"].get<double>(), 0) << p["id"];
    EXPECT_LT(by_class["matmul"].get<double>(), p["simulated_step_s"].get<double>());
    EXPECT_GE(p["exposed_comm_s"].get<double>(), 0);
    EXPECT_LT(p["exposed_comm_s"].get<double>(), p["simulated_step_s"].get<double>());
  }
  EXPECT_EQ(j["bf16_fp16"]["points"], 4);
  // Thresholds nothing meets: exit 4, each exceeded limit named.
  write_file("t.json", R"({"published": {"max_median_abs_error": 1e-9,
      "max_p90_abs_error": 1e-9, "max_abs_median_signed_error": 1e-9,
      "max_fp8_median_abs_error": 1, "max_long_sequence_median_abs_error": 1}})");
  const CommandResult strict =
      meshsim({"validate-published", "few.json", "--thresholds", "t.json"});
  EXPECT_EQ(strict.exit_code, 4) << strict.output;
  EXPECT_THAT(strict.output, HasSubstr("threshold exceeded: median |error|"));
}

// --run ID: one run reported as `meshsim run` reports a step, its error the same as in the whole
// set's report, its report and timeline written when asked; an id the file lacks, and the flags
// that only make sense with or without it, are bad input (exit 2, the flag named).
TEST_F(PublishedCommandTest, OneRunWithItsReportAndTimeline) {
  const std::string id = "dgxc2504-llama3.1-8b-32xH100-bf16";
  // The set's report of a file holding that run alone (a point's error does not depend on the
  // other points; the whole dev set under the sanitizers took 110 s of CI).
  nlohmann::json alone = nlohmann::json::array();
  for (const nlohmann::json& r : nlohmann::json::parse(std::ifstream(kRuns))) {
    if (r["id"] == id) {
      alone.push_back(r);
    }
  }
  ASSERT_EQ(alone.size(), 1u);
  write_json("alone.json", alone);
  const CommandResult all = meshsim({"validate-published", "alone.json", "--json", "all.json"});
  ASSERT_EQ(all.exit_code, 0) << all.output;
  double expected_error = 0;
  const nlohmann::json report = read_json("all.json");
  for (const nlohmann::json& p : report["points"]) {
    if (p["id"] == id) {
      expected_error = p["error"].get<double>();
    }
  }
  ASSERT_NE(expected_error, 0);

  const CommandResult one = meshsim({"validate-published", kRuns, "--run", id, "--json",
                                     "one.json", "--trace", "one.pftrace"});
  ASSERT_EQ(one.exit_code, 0) << one.output;
  expect_has_all(one.output, {"run " + id, "measured: ", "exposed communication",
                              "trace                 one.pftrace",
                              fmt::format("{:+.1f}%", 100 * expected_error)});
  const nlohmann::json j = read_json("one.json");
  EXPECT_EQ(j["published"]["id"], id);
  EXPECT_NEAR(j["published"]["error"].get<double>(), expected_error, 1e-12);
  EXPECT_NEAR(j["step_time_s"].get<double>() / j["published"]["measured_step_s"].get<double>() - 1,
              expected_error, 1e-12);
  EXPECT_GT(std::filesystem::file_size(path("one.pftrace")), 0u);

  const CommandResult no = meshsim({"validate-published", kRuns, "--run",
                                    "mlm-readme-h100-strong-177B-96xH100"});
  EXPECT_EQ(no.exit_code, 0) << no.output;
  EXPECT_THAT(no.output, HasSubstr("not expressible: the parallel layout (tp, pp, dp) is not "
                                   "stated"));

  const CommandResult unknown = meshsim({"validate-published", kRuns, "--run", "no-such-run"});
  EXPECT_EQ(unknown.exit_code, 2);
  expect_has_all(unknown.output, {"--run", "no run \"no-such-run\""});
  const CommandResult trace_alone =
      meshsim({"validate-published", kRuns, "--trace", "x.pftrace"});
  EXPECT_EQ(trace_alone.exit_code, 2);
  EXPECT_THAT(trace_alone.output, HasSubstr("--trace"));
  const CommandResult thresholds_one =
      meshsim({"validate-published", kRuns, "--run", id, "--thresholds", "t.json"});
  EXPECT_EQ(thresholds_one.exit_code, 2);
  EXPECT_THAT(thresholds_one.output, HasSubstr("--thresholds"));
  const CommandResult full_alone = meshsim({"validate-published", kRuns, "--full-simulation"});
  EXPECT_EQ(full_alone.exit_code, 2);
  EXPECT_THAT(full_alone.output, HasSubstr("--full-simulation"));
}

// --run ID --full-simulation: every rank simulated, the same step as the set's representative
// simulation (a multi-slice TPU run with TP, where the two once differed by 6 %).
TEST_F(PublishedCommandTest, OneRunFullySimulatedAgreesWithTheSet) {
  const std::string id = "maxtext-v5p-128B-2xv5p-512";
  const CommandResult rep = meshsim({"validate-published", kRuns, "--run", id, "--json", "r.json"});
  ASSERT_EQ(rep.exit_code, 0) << rep.output;
  const CommandResult full = meshsim(
      {"validate-published", kRuns, "--run", id, "--full-simulation", "--json", "f.json"});
  ASSERT_EQ(full.exit_code, 0) << full.output;
  EXPECT_THAT(full.output, HasSubstr("512 ranks (full mode)"));
  const nlohmann::json r = read_json("r.json");
  const nlohmann::json f = read_json("f.json");
  EXPECT_EQ(r["simulation"]["mode"], "representative");
  EXPECT_EQ(f["simulation"]["mode"], "full");
  EXPECT_DOUBLE_EQ(r["step_time_s"].get<double>(), f["step_time_s"].get<double>());
}

}  // namespace
}  // namespace meshsim::validation::test
