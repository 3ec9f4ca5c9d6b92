// Every published run expressible that can be: a dense model by its shape whatever its name, a
// layout stated in part completed by the devices or the framework's documented default, runs on
// part of a node, export variants of chips, the unstated precision and micro-batch a source's own
// example gives, and metrics in Megatron-Core's FLOP convention. What still cannot be expressed
// says why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "meshsim/validation/published.h"
#include "meshsim/validation/published_flops.h"
#include "published_test_util.h"

namespace meshsim::validation::test {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

// A GPT-7.5B record renamed: a dense model of no known family is costed by its stated shape as
// Megatron's GPT, and says so.
PublishedRun renamed(const std::string& name) {
  PublishedRun r = dev_run("mlm2021-t1-7.5B-128xA100");
  r.model.name = name;
  r.model.arch_notes.clear();
  return r;
}

TEST(PublishedExpress, ADenseModelOfAnyNameIsCostedByItsShape) {
  const PublishedScenario bloom = mapped(renamed("BLOOM-7B1"));
  EXPECT_EQ(bloom.model.architecture, workloads::Architecture::kGpt2);
  EXPECT_EQ(bloom.model.d_ff, 16384);
  EXPECT_EQ(bloom.model.num_layers, 36);
  EXPECT_THAT(bloom.assumptions,
              Contains(HasSubstr("\"BLOOM-7B1\" names no model family run_facts.json knows")));
  const PublishedScenario gpt = mapped(renamed("GPT-7.5B"));
  EXPECT_EQ(gpt.measured_step, bloom.measured_step);
  EXPECT_THAT(gpt.assumptions, ::testing::Not(Contains(HasSubstr("names no model family"))));
  // A mixture of experts of unknown shape stays out: its experts' layout is not in the record.
  PublishedRun moe = renamed("Some-MoE-100B");
  moe.model.moe = true;
  EXPECT_THAT(refusal(moe), HasSubstr("mixture of experts"));
}

// A model the name gives, its shape left out: the published shape (GPT-3 175B: Brown et al.).
TEST(PublishedExpress, ANamedModelsPublishedShapeFillsWhatTheRecordLeavesOut) {
  PublishedRun r = dev_run("mlm2021-t2-ptdp-174.6B-768xA100");
  r.model.name = "GPT-3 175B";
  r.model.layers.reset();
  r.model.hidden.reset();
  r.model.heads.reset();
  const PublishedScenario s = mapped(r);
  EXPECT_EQ(s.model.num_layers, 96);
  EXPECT_EQ(s.model.d_model, 12288);
  EXPECT_EQ(s.model.num_heads, 96);
  EXPECT_THAT(s.assumptions, Contains(HasSubstr("the number of layers 96: not in the record")));
}

// The layout stated in part: an unstated degree follows from the devices and the stated ones; TP
// and PP both unstated but DP stated split by the framework's rule (Narayanan et al. 2021: TP
// within the node); a degree nothing determines takes the framework's default; nothing stated at
// all is refused.
TEST(PublishedExpress, APartialLayoutIsCompletedAndSaysHow) {
  const PublishedRun& t2 = dev_run("mlm2021-t2-ptdp-174.6B-768xA100");
  ASSERT_FALSE(t2.parallelism.tp.has_value());
  ASSERT_EQ(t2.parallelism.dp, 8);
  const PublishedScenario split = mapped(t2);
  EXPECT_EQ(split.plan.tp, 8);
  EXPECT_EQ(split.plan.pp, 12);
  EXPECT_THAT(split.assumptions, Contains(HasSubstr("tp 8 x pp 12: the stated model-parallel "
                                                    "size 96 split by Narayanan et al. 2021")));
  // The paper's runs recompute every layer (examples/sc21), which eq. 3 counts.
  EXPECT_EQ(split.plan.recompute, workloads::Recompute::kFull);

  PublishedRun derived = t2;
  derived.parallelism.tp = 4;
  const PublishedScenario d = mapped(derived);
  EXPECT_EQ(d.plan.pp, 24);
  EXPECT_THAT(d.assumptions, Contains(HasSubstr("pp 24: the devices over the stated degrees")));

  PublishedRun defaulted = dev_run("dgxc2504-llama3.1-8b-32xH100-bf16");
  defaulted.parallelism.pp.reset();
  defaulted.parallelism.dp.reset();
  const PublishedScenario def = mapped(defaulted);
  EXPECT_EQ(def.plan.pp, 1);
  EXPECT_EQ(def.plan.dp, 16);
  EXPECT_THAT(def.assumptions, Contains(HasSubstr("pp 1: not stated; Megatron-Core's")));

  // Another framework has no rule for the split: refused, saying what is missing.
  PublishedRun no_rule = t2;
  no_rule.framework = "NeMo 24.07";
  EXPECT_THAT(refusal(no_rule), HasSubstr("could split either way"));
  PublishedRun nothing = defaulted;
  nothing.parallelism.tp.reset();
  EXPECT_THAT(refusal(nothing), HasSubstr("the parallel layout (tp, pp, dp) is not stated"));
}

// The distributed optimizer (NeMo's and Megatron-Bridge's default) shards over the data-parallel
// ranks: a run with one has nothing to shard and maps without it, not as a plan meshsim rejects.
TEST(PublishedExpress, NoDistributedOptimizerWithoutDataParallelism) {
  PublishedRun r = dev_run("dgxc2504-llama3.1-70b-64xH100-bf16");
  ASSERT_GT(mapped(r).plan.dp, 1);
  EXPECT_EQ(mapped(r).plan.zero, workloads::ZeroStage::kOptimizerStates);
  r.devices = r.parallelism.tp.value_or(1) * r.parallelism.pp.value_or(1) *
              r.parallelism.cp.value_or(1);
  r.parallelism.dp = 1;
  r.batch.sequences = 16;
  const PublishedScenario one = mapped(r);
  EXPECT_EQ(one.plan.dp, 1);
  EXPECT_EQ(one.plan.zero, workloads::ZeroStage::kNone);
}

// Two or four GPUs of an 8-GPU NVSwitch node: each keeps its full NVLink bandwidth.
TEST(PublishedExpress, RunsOnPartOfANode) {
  PublishedRun r = dev_run("mpt-a100_80gb-amp_bf16-3b-seq2048-8gpu-mbs10-ga2");
  for (const int64_t gpus : {2, 4}) {
    r.devices = gpus;
    r.parallelism.dp = gpus;
    r.batch.sequences = gpus * 10 * 2;
    const PublishedScenario s = mapped(r);
    EXPECT_EQ(s.cluster.device_count(), gpus);
    EXPECT_EQ(s.cluster.scale_up_bandwidth(),
              topology::Catalogue::builtin().chip("a100-80gb").nvlink->total_bandwidth());
    EXPECT_THAT(s.assumptions, Contains(HasSubstr(fmt::format("{} GPUs of one 8-GPU node", gpus))));
  }
  r.devices = 3;  // not a part an 8-GPU node divides into: refused
  r.parallelism.dp = 3;
  r.batch.sequences = 60;
  EXPECT_THAT(refusal(r), HasSubstr("not whole 8-GPU nodes"));
}

// Export variants: H800 with 8 NVLink links (the H100 has 18); the Grand
// Teton H100's peak an upper bound, said for every run on it.
TEST(PublishedExpress, ExportVariantsAndTheGrandTetonH100) {
  PublishedRun r = dev_run("dgxc2504-llama3.1-8b-32xH100-bf16");
  r.hardware_key = "H800";
  const PublishedScenario h800 = mapped(r);
  EXPECT_EQ(h800.cluster.chip.name, "h800-sxm");
  EXPECT_EQ(h800.cluster.scale_up_links, 8);
  EXPECT_EQ(h800.cluster.scale_up_bandwidth(), GBps(200));
  r.hardware_key = "A800-SXM4-80GB";
  EXPECT_EQ(mapped(r).cluster.chip.name, "a800-80gb");

  const PublishedScenario teton = mapped(dev_run("torchtitan-llama3-8B-8xH100-cp1-seq32768"));
  EXPECT_EQ(teton.cluster.chip.name, "h100-sxm-96gb-hbm2e");
  EXPECT_THAT(teton.assumptions, Contains(HasSubstr("meshsim interpolates by power")));
  r.hardware_key = "H20";
  EXPECT_THAT(refusal(r), HasSubstr("hardware \"H20\" has no cluster preset"));
}

// Megatron-LM's README benchmarks state neither precision nor micro-batch: the README's own GPT-3
// example at that release gives both; its TFLOP/s are Megatron-Core's own FLOP count.
TEST(PublishedExpress, TheSourcesOwnExampleGivesPrecisionAndMicroBatch) {
  const PublishedRun& r = dev_run("mlm-readme-h100-weak-7.1B-96xH100");
  ASSERT_EQ(r.precision_class, "unknown");
  const PublishedScenario s = mapped(r);
  EXPECT_EQ(s.plan.matmul_dtype, Dtype::kFp16);
  EXPECT_EQ(s.plan.mbs, 1);
  EXPECT_TRUE(s.plan.overlap.tensor_parallel);  // the README's --tp-comm-overlap
  EXPECT_THAT(s.assumptions, Contains(HasSubstr("precision fp16: not in the record, but the "
                                                "README's own GPT-3 example")));
  // 192 sequences of 4096 tokens, 30 layers of 4096, 32 heads, ffn 4 h, vocabulary 131072:
  // 12 B s l h^2 ((1 + 1 + s/h) + 4 + V / (2 l h)) FLOPs at 465.9 TFLOP/s on each of 96 GPUs.
  const double flops = 12.0 * 192 * 4096 * 30 * 4096.0 * 4096 *
                       (2.0 + 4096.0 / 4096 + 4.0 + 131072.0 / (2 * 30 * 4096));
  EXPECT_NEAR(s.measured_step.seconds(), flops / (465.9e12 * 96), 1e-9);
}

TEST(PublishedExpress, MegatronCoreFlopConventionAsItsSourceWritesIt) {
  // Llama 3 8B (GQA 8 of 32 heads, SwiGLU 14336, vocabulary 128256), 1 sequence of 8192 tokens.
  MegatronCoreShape m;
  m.layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.query_groups = 8;
  m.kv_channels = 128;
  m.ffn = 14336;
  m.vocab = 128256;
  m.gated = true;
  const double expected = 12.0 * 8192 * 32 * 4096.0 * 4096 *
                          ((1 + 0.25 + 2.0) * 1.0 + 3.5 * 1.5 + 128256.0 / (2 * 32 * 4096));
  EXPECT_NEAR(megatron_core08_iteration_flops(1, 8192, m).count(), expected, expected * 1e-12);
}

// torchtitan accumulates no gradients unless told: a record's unstated micro-batch is the
// data-parallel rank's whole share ("local batch size").
TEST(PublishedExpress, TorchtitansMicroBatchIsTheLocalBatch) {
  const PublishedRun& r = dev_run("torchtitan-asynctp-llama3-70B-256xH100-bf16-asyncTP");
  ASSERT_FALSE(r.batch.micro_batch.has_value());
  const PublishedScenario s = mapped(r);
  EXPECT_EQ(s.plan.dp, 32);
  EXPECT_EQ(s.plan.mbs, 16);
  EXPECT_EQ(s.plan.microbatches(), 1);
  EXPECT_THAT(s.assumptions, Contains(HasSubstr("micro-batch 16 (not stated): torchtitan")));
}

// A record that names Megatron-Core's --fp8-param-gather gets it where Megatron runs it (FP8
// training with the distributed optimizer); where it could not run, the words are an assumption.
TEST(PublishedExpress, FP8ParameterGathersWhereTheRecordNamesThem) {
  PublishedRun r = dev_run("dgxc2504-llama3.1-70b-2048xH100-fp8");
  EXPECT_FALSE(mapped(r).plan.fp8_param_gather);
  r.parallelism.notes += "; FP8 parameter gather";
  const PublishedScenario s = mapped(r);
  ASSERT_NE(s.plan.zero, workloads::ZeroStage::kNone);
  EXPECT_TRUE(s.plan.fp8_param_gather);
  EXPECT_THAT(s.assumptions, Contains(HasSubstr("FP8 parameter gathers: Megatron-Core's")));
  PublishedRun bf16 = dev_run("dgxc2504-llama3.1-70b-64xH100-bf16");
  bf16.framework += " with --fp8-param-gather";
  const PublishedScenario b = mapped(bf16);
  EXPECT_FALSE(b.plan.fp8_param_gather);
  EXPECT_THAT(b.assumptions, Contains(HasSubstr("named but not run")));
}

// A point of a known framework maps to the stack of its time by a rule over its framework text and
// date (run_facts.json's eras), never by a per-run constant.
//  * Megatron-LM before 16c90445e (2021-09-02, which added "--no-async-tensor-model-parallel-
//    allreduce") is megatron-2021: Narayanan et al.'s runs (arXiv:2104.04473);
//  * Megatron-LM from then to Transformer Engine (3499542edd, 2022-12-21: "Transformer Engine
//    Integration Rebase") is megatron-2022: Korthikanti et al.'s (arXiv:2205.05198), whose
//    train_step all-reduces after forward_backward_func ("model_module.allreduce_gradients()")
//    whatever the pipeline;
//  * Megatron-LM from then until Transformer Engine became its default (2024-04) is megatron-2023,
//    unless the text names Megatron-Core, NeMo or Transformer Engine;
//  * DeepSpeed without model parallelism in 2021 is deepspeed-zero3-2021 (constants.py @ v0.3.13:
//    "ZERO3_OPTIMIZATION_OVERLAP_COMM_DEFAULT = True", "stage3_prefetch_bucket_size" 50000000);
//  * PaxML is paxml (configure.sh @ 35a9aec: "python3 -u -m paxml.main").
// A 2022 run naming DeepSpeed with model parallelism (BLOOM's Megatron-DeepSpeed) runs on
// DeepSpeed's pipeline engine: its stages split as PipelineModule's type:transformer partition
// does where the pipeline does not divide the layers, bf16 shards the optimizer whatever ZeRO
// stage the record states (BF16_Optimizer), and its TFLOP/s count the recompute it ran.
TEST(PublishedStacks, MegatronDeepSpeedRunsOnDeepSpeedsPipelineEngine) {
  PublishedRun r = dev_run("mlm2021-t1-7.5B-128xA100");
  r.citation =
      "BigScience, 'BLOOM: A 176B-Parameter Open-Access Multilingual Language Model', "
      "arXiv:2211.05100";
  r.framework = "Megatron-DeepSpeed";
  r.model.layers = 30;
  r.parallelism.pp = 4;
  r.parallelism.dp = 8;  // TP 4 x PP 4 x DP 8 = 128
  r.batch.micro_batch = 2;
  r.precision = "bf16";
  r.precision_class = "bf16";
  r.parallelism.zero_stage = 0;  // the config's stage; BF16_Optimizer shards anyway
  const PublishedScenario s = mapped(r);
  EXPECT_EQ(s.plan.stack, workloads::Stack::kMegatronDeepSpeed2022);
  EXPECT_EQ(s.plan.stage_layers, (std::vector<int64_t>{8, 8, 8, 6}));
  EXPECT_THAT(s.assumptions, Contains(HasSubstr("30 layers over pp 4: 8, 8, 8, 6 per stage")));
  EXPECT_EQ(s.plan.zero, workloads::ZeroStage::kOptimizerStates);
  EXPECT_THAT(s.assumptions, Contains(HasSubstr("BF16_Optimizer")));
  EXPECT_FALSE(bound_overlaps(s).grad_reduce);  // the stack's: ReduceGrads after the backward
  EXPECT_FALSE(s.plan.origins[workloads::PlanField::kOverlapGradReduce].given());
  // Its TFLOP/s log: equation 3 with the factor of the recompute the run has (4 with full
  // recompute, as Narayanan et al.'s; 3 without).
  ASSERT_EQ(s.plan.recompute, workloads::Recompute::kFull);
  const Flops eq3 = megatron2021_iteration_flops(512, 2048, 30, 4096, 51200);
  EXPECT_NEAR(s.measured_step.seconds(), eq3.count() / (142e12 * 128), 1e-9);
  r.parallelism.recompute = "none";
  r.batch.micro_batch = 1;
  const PublishedScenario none = mapped(r);
  EXPECT_NEAR(none.measured_step / s.measured_step, 0.75, 1e-9);
  EXPECT_THAT(none.conversion, HasSubstr("recompute factor 3"));
  // A text naming DeepSpeed's ZeRO-3 is not its pipeline engine (which refuses ZeRO-2 and 3): a
  // run with model parallelism is Megatron-LM's, as Narayanan et al.'s Table 2 rows of PTD-P are.
  r.model.layers = 36;  // a split Megatron-LM's stacks run
  r.framework = "Megatron-LM / DeepSpeed ZeRO-3";
  EXPECT_EQ(mapped(r).plan.stack, workloads::Stack::kMegatron2022);  // Megatron-LM of 2022
  // From 2023 a Megatron-DeepSpeed run is left to Megatron-LM's stacks of that time.
  r.framework = "Megatron-DeepSpeed";
  r.citation = "a 2023 report (arXiv:2305.00001)";
  EXPECT_NE(mapped(r).plan.stack, workloads::Stack::kMegatronDeepSpeed2022);
}

// A JAX (or TensorFlow) model of the years before Pallas kernels is costed as the XLA executable
// MaxText's stack models, with its attention as einsums around a softmax (scores materialised),
// and says so; MaxText and PaxML keep their own entries.
TEST(PublishedStacks, AJaxModelOfItsTimeRunsAsXlaWithMaterialisedAttention) {
  PublishedRun r = dev_run("maxtext-v4-22B-4xv4-128");
  r.measured = {"step_time", 30.0, "s"};
  r.framework = "JAX (Haiku)";
  r.citation =
      "Rae et al., 'Scaling Language Models: Methods, Analysis & Insights from Training "
      "Gopher', arXiv:2112.11446";
  const PublishedScenario s = mapped(r);
  EXPECT_EQ(s.plan.stack, workloads::Stack::kMaxText);
  EXPECT_EQ(s.plan.attention, workloads::AttentionKernel::kNaive);
  EXPECT_TRUE(s.plan.origins[workloads::PlanField::kAttention].given());
  EXPECT_THAT(s.assumptions, Contains(HasSubstr("costed as MaxText's")));
  EXPECT_THAT(s.assumptions, Contains(HasSubstr("no fused attention kernel for TPUs before")));
  r.measured = {"tflops_per_chip", 100.0, "TFLOP/s"};  // whose count this framework is not known
  EXPECT_THAT(refusal(r), HasSubstr("the source's FLOP convention is not known"));
  r.framework = "MaxText (JAX/XLA)";
  r.measured = {"step_time", 30.0, "s"};
  EXPECT_FALSE(mapped(r).plan.origins[workloads::PlanField::kAttention].given());  // its stack's
}

TEST(PublishedStacks, EachFrameworkMapsToTheStackOfItsTime) {
  PublishedRun r = dev_run("mlm2021-t1-7.5B-128xA100");
  r.measured = {"step_time", 3.7, "s"};
  EXPECT_EQ(mapped(r).plan.stack, workloads::Stack::kMegatron2021);
  r.framework = "Megatron-LM (sequence parallelism + selective recompute)";
  r.citation = "Korthikanti et al., 'Reducing Activation Recomputation in Large Transformer "
               "Models', MLSys 2023 / arXiv:2205.05198";
  const PublishedScenario k = mapped(r);
  EXPECT_EQ(k.plan.stack, workloads::Stack::kMegatron2022);
  // The local DDP's all-reduce after the backward: the stack's default, whatever the pipeline.
  EXPECT_FALSE(bound_overlaps(k).grad_reduce);
  EXPECT_FALSE(k.plan.origins[workloads::PlanField::kOverlapGradReduce].given());
  // From Transformer Engine's integration until it became the default implementation
  // (e7b74a4b7e, 2024-04-02: "Change default `transformer_impl` to `transformer_engine` instead
  // of `local`"), Megatron-LM ran its legacy layers unless told: megatron-2023, materialised
  // scores unless the record names FlashAttention (--use-flash-attn), gradients after the backward.
  r.framework = "Megatron-LM (2023)";
  const PublishedScenario l = mapped(r);
  EXPECT_EQ(l.plan.stack, workloads::Stack::kMegatron2023);
  EXPECT_FALSE(l.plan.origins[workloads::PlanField::kAttention].given());  // the stack's: naive
  EXPECT_FALSE(bound_overlaps(l).grad_reduce);
  r.framework = "Megatron-LM (2023) with FlashAttention";
  const PublishedScenario f = mapped(r);
  EXPECT_EQ(f.plan.stack, workloads::Stack::kMegatron2023);
  EXPECT_EQ(f.plan.attention, workloads::AttentionKernel::kFlash);
  EXPECT_TRUE(f.plan.origins[workloads::PlanField::kAttention].given());
  EXPECT_THAT(f.assumptions, Contains(HasSubstr("attention flash: the record names")));
  r.framework = "Megatron-LM (2024-04)";  // Transformer Engine by default: today's stack
  EXPECT_EQ(mapped(r).plan.stack, workloads::Stack::kMegatron);
  r.framework = "Megatron-LM / Megatron-Core (2023)";  // Megatron-Core named: TE's layers
  EXPECT_EQ(mapped(r).plan.stack, workloads::Stack::kMegatron);

  // Narayanan et al.'s Table 2 names both frameworks: a run with model parallelism is PTD-P
  // (Megatron-LM), one without is DeepSpeed's ZeRO-3, its stage from the name when unstated.
  PublishedRun t2 = dev_run("mlm2021-t2-ptdp-174.6B-768xA100");
  ASSERT_EQ(t2.framework, "Megatron-LM / DeepSpeed ZeRO-3");
  EXPECT_EQ(mapped(t2).plan.stack, workloads::Stack::kMegatron2021);
  t2.parallelism.tp = 1;
  t2.parallelism.pp = 1;
  t2.parallelism.dp = 768;
  t2.batch.micro_batch = 2;
  const PublishedScenario z = mapped(t2);
  EXPECT_EQ(z.plan.stack, workloads::Stack::kDeepSpeedZero3_2021);
  EXPECT_EQ(z.plan.zero, workloads::ZeroStage::kParameters);
  EXPECT_THAT(z.assumptions, Contains(HasSubstr("ZeRO stage 3: the framework the record names")));
  EXPECT_EQ(z.plan.recompute, workloads::Recompute::kFull);  // the paper's runs (examples/sc21)

  EXPECT_EQ(mapped(dev_run("dgxc2411-paxml-gpt5B-16xH100-fp8")).plan.stack,
            workloads::Stack::kPaxml);
}

}  // namespace
}  // namespace meshsim::validation::test
