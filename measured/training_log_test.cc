#include "measured/training_log.h"

#include <gtest/gtest.h>

namespace monarch::measured {
namespace {

// Megatron-LM's training_log line (megatron/training/training.py), two iterations.
constexpr const char* kMegatron =
    "[before the start of training step] datetime: 2024-05-01 10:00:00\n"
    " [2024-05-01 10:00:05] iteration        1/      50 | consumed samples:          512 | elapsed time per "
    "iteration (ms): 5432.1 | throughput per GPU (TFLOP/s/GPU): 301.5 | learning rate: 1.500000E-05 | global batch "
    "size:   512 | lm loss: 1.093750E+01 | loss scale: 1.0 | grad norm: 12.345 | number of skipped iterations:   0 |"
    " number of nan iterations:   0 |\n"
    " [2024-05-01 10:00:07] iteration        2/      50 | consumed samples:         1024 | elapsed time per "
    "iteration (ms): 2100.0 | throughput per GPU (TFLOP/s/GPU): 402.0 | learning rate: 3.000000E-05 | global batch "
    "size:   512 | lm loss: 1.071234E+01 | loss scale: 1.0 | grad norm: 9.876 |\n";

// torchtitan's metrics line, coloured as it prints it on a terminal.
constexpr const char* kTitan =
    "[rank0]:[titan] 2025-01-01 00:00:10,000 - root - INFO - \x1b[31mstep:  1  \x1b[32mloss: 12.0422  "
    "\x1b[38;2;180;60;0mgrad_norm:  4.1234  \x1b[38;2;54;234;195mmemory: 41.23GiB(52.10%)  \x1b[34mtps: 1,234  "
    "\x1b[36mtflops: 71.02  \x1b[35mmfu: 7.18%\x1b[39m\n"
    "[rank0]:[titan] 2025-01-01 00:00:12,000 - root - INFO - step:  2  loss: 11.5000  grad_norm:  3.0000  memory: "
    "43.00GiB(54.00%)  tps: 8,000  tflops: 460.5  mfu: 46.56%\n";

TEST(TrainingLog, Megatron) {
  auto log = parse_training_log(kMegatron, "train.log");
  ASSERT_TRUE(log) << log.problems()[0].to_string();
  EXPECT_EQ(log->format, LogFormat::kMegatron);
  ASSERT_EQ(log->steps.size(), 2u);
  EXPECT_EQ(log->steps[1].step, 2);
  EXPECT_DOUBLE_EQ(*log->steps[0].iteration_s, 5.4321);
  EXPECT_DOUBLE_EQ(*log->steps[1].tflops_per_gpu, 402.0);
  EXPECT_DOUBLE_EQ(*log->steps[1].loss, 10.71234);
  EXPECT_DOUBLE_EQ(*log->steps[0].grad_norm, 12.345);
}

TEST(TrainingLog, TorchtitanWithAndWithoutColour) {
  auto log = parse_training_log(kTitan, "titan.log");
  ASSERT_TRUE(log) << log.problems()[0].to_string();
  EXPECT_EQ(log->format, LogFormat::kTorchtitan);
  ASSERT_EQ(log->steps.size(), 2u);
  EXPECT_DOUBLE_EQ(*log->steps[0].loss, 12.0422);
  EXPECT_DOUBLE_EQ(*log->steps[0].memory_gib, 41.23);
  EXPECT_DOUBLE_EQ(*log->steps[0].tokens_per_s_per_gpu, 1234);
  EXPECT_DOUBLE_EQ(*log->steps[1].tokens_per_s_per_gpu, 8000);
  EXPECT_NEAR(*log->steps[1].mfu, 0.4656, 1e-12);
  EXPECT_DOUBLE_EQ(*log->steps[1].tflops_per_gpu, 460.5);
  EXPECT_FALSE(log->steps[0].iteration_s);
}

TEST(TrainingLog, NoIterationLineIsAProblemNamingTheFile) {
  auto log = parse_training_log("starting\nloading checkpoint\n", "empty.log");
  ASSERT_FALSE(log);
  EXPECT_EQ(log.problems()[0].where, "empty.log");
  EXPECT_NE(log.problems()[0].message.find("no iteration line"), std::string::npos);
}

TEST(TrainingLog, StripAnsi) { EXPECT_EQ(strip_ansi("\x1b[1;31mred\x1b[0m plain"), "red plain"); }

}  // namespace
}  // namespace monarch::measured
