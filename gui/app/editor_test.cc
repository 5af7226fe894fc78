// The scenario editor under QT_QPA_PLATFORM=offscreen: problems at their field with the
// command line's message, edits never lost on bad input, atomic save.
#include <gtest/gtest.h>

#include <QApplication>
#include <QFile>
#include <QTemporaryDir>

#include "core/scenario_io.h"
#include "gui/app/scenario_editor.h"

namespace monarch::gui {
namespace {

QApplication& app() {
  static int argc = 1;
  static char name[] = "editor_test";
  static char* argv[] = {name, nullptr};
  // Never destroyed: tearing Qt down during static destruction at exit crashes.
  static QApplication* a = new QApplication(argc, argv);
  return *a;
}

constexpr const char* kValidScenario = R"({
  "name": "editor-test",
  "model": { "architecture": "gpt", "num_layers": 24, "hidden_size": 2048,
             "num_attention_heads": 16, "vocab_size": 51200, "seq_length": 2048 },
  "cluster": { "gpu": "A100-80GB", "num_gpus": 16, "gpus_per_node": 8,
               "intra_node": { "bandwidth_GBps": 300, "latency_us": 2 },
               "inter_node": { "bandwidth_GBps": 25, "nics_per_node": 8, "latency_us": 5,
                               "topology": "fat-tree", "oversubscription": 1 } },
  "training": { "global_batch_size": 32, "precision": "bf16" },
  "parallelism": { "tp": 2 },
  "whatif": {}
})";

TEST(ScenarioEditor, ProblemsAtTheFieldWithTheCommandLineMessage) {
  app();
  ScenarioEditor editor;
  ASSERT_FALSE(editor.load_text(kValidScenario, "/tmp/x.json"));
  ASSERT_TRUE(editor.scenario()) << (editor.problems().empty() ? "" : editor.problems()[0].to_string());
  EXPECT_EQ(editor.field_text("/cluster/num_gpus"), "16");
  EXPECT_EQ(editor.field_text("/parallelism/tensor_parallel_degree"), "2");  // written as alias "tp"
  EXPECT_FALSE(editor.modified());

  ASSERT_TRUE(editor.set_field_text("/cluster/num_gpus", "-4"));
  EXPECT_FALSE(editor.scenario());
  EXPECT_TRUE(editor.modified());
  // The message is scenario_io's, as the command line prints it.
  Expected<Scenario> direct = scenario_from_json(editor.document(), "/tmp");
  ASSERT_FALSE(direct.ok());
  bool found = false;
  for (const Problem& p : direct.problems())
    if (p.where == "/cluster/num_gpus") {
      found = true;
      EXPECT_TRUE(editor.field_problem("/cluster/num_gpus").contains(QString::fromStdString(p.message)));
    }
  EXPECT_TRUE(found);
  // Not a number at all: kept as typed, reported, nothing lost.
  ASSERT_TRUE(editor.set_field_text("/model/hidden_size", "lots"));
  EXPECT_EQ(editor.document()["model"]["hidden_size"], "lots");
  EXPECT_FALSE(editor.field_problem("/model/hidden_size").isEmpty());
  EXPECT_EQ(editor.document()["cluster"]["num_gpus"], -4);
  // The alias stays an alias; unknown-to-the-form keys stay.
  ASSERT_TRUE(editor.set_field_text("/parallelism/tensor_parallel_degree", "4"));
  EXPECT_EQ(editor.document()["parallelism"]["tp"], 4);
  EXPECT_FALSE(editor.document()["parallelism"].contains("tensor_parallel_degree"));
  EXPECT_TRUE(editor.document().contains("whatif"));

  // A broken file does not replace the edited document.
  const nlohmann::json before = editor.document();
  std::optional<Problem> bad = editor.load_text("{ \"model\": ", "/tmp/broken.json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(editor.document(), before);
  EXPECT_TRUE(editor.modified());
  EXPECT_TRUE(editor.load_text("[1, 2]", "/tmp/array.json"));
  EXPECT_EQ(editor.document(), before);

  // Fix the edits: valid again.
  editor.set_field_text("/cluster/num_gpus", "16");
  editor.set_field_text("/model/hidden_size", "2048");
  EXPECT_TRUE(editor.scenario());
  EXPECT_TRUE(editor.field_problem("/cluster/num_gpus").isEmpty());
  // Clearing a field removes the key (searched / default).
  editor.set_field_text("/parallelism/tensor_parallel_degree", "");
  EXPECT_FALSE(editor.document()["parallelism"].contains("tp"));

  // CUDA graphs are a JSON boolean, and a framework without them is reported at the key.
  ASSERT_TRUE(editor.set_field_text("/training/cuda_graphs", "true"));
  EXPECT_EQ(editor.document()["training"]["cuda_graphs"], true);
  EXPECT_TRUE(editor.scenario());
  ASSERT_TRUE(editor.set_field_text("/training/framework", "torchtitan"));
  EXPECT_FALSE(editor.scenario());
  EXPECT_TRUE(editor.field_problem("/training/cuda_graphs").contains("torchtitan"));
  editor.set_field_text("/training/framework", "");
  EXPECT_TRUE(editor.scenario());
  // torch.compile is torchtitan's: under Megatron the key reports the conflict.
  editor.set_field_text("/training/cuda_graphs", "");
  ASSERT_TRUE(editor.set_field_text("/training/compile", "true"));
  EXPECT_EQ(editor.document()["training"]["compile"], true);
  EXPECT_FALSE(editor.scenario());
  EXPECT_TRUE(editor.field_problem("/training/compile").contains("megatron"));
  editor.set_field_text("/training/compile", "");
  // The gradients' reduction type is a boolean; false under fp32 training is reported at the key.
  ASSERT_TRUE(editor.set_field_text("/training/grad_reduce_in_fp32", "false"));
  EXPECT_EQ(editor.document()["training"]["grad_reduce_in_fp32"], false);
  EXPECT_TRUE(editor.scenario());
  ASSERT_TRUE(editor.set_field_text("/training/precision", "fp32"));
  EXPECT_FALSE(editor.scenario());
  EXPECT_TRUE(editor.field_problem("/training/grad_reduce_in_fp32").contains("fp32"));
  editor.set_field_text("/training/grad_reduce_in_fp32", "");
  EXPECT_TRUE(editor.scenario());
  editor.set_field_text("/training/precision", "bf16");
  // The cross entropy's fusion is Megatron's choice: under DeepSpeed the key reports it.
  ASSERT_TRUE(editor.set_field_text("/training/cross_entropy_loss_fusion", "false"));
  EXPECT_EQ(editor.document()["training"]["cross_entropy_loss_fusion"], false);
  EXPECT_TRUE(editor.scenario());
  editor.set_field_text("/training/framework", "deepspeed");
  EXPECT_FALSE(editor.scenario());
  EXPECT_TRUE(editor.field_problem("/training/cross_entropy_loss_fusion").contains("deepspeed"));
  editor.set_field_text("/training/framework", "");
  editor.set_field_text("/training/cross_entropy_loss_fusion", "");
  EXPECT_TRUE(editor.scenario());
  // An fp8 recipe needs fp8: under bf16 the key reports the precision.
  ASSERT_TRUE(editor.set_field_text("/training/fp8_recipe", "tensorwise"));
  EXPECT_EQ(editor.document()["training"]["fp8_recipe"], "tensorwise");
  EXPECT_FALSE(editor.scenario());
  EXPECT_TRUE(editor.field_problem("/training/fp8_recipe").contains("precision"));
  editor.set_field_text("/training/fp8_recipe", "");
  EXPECT_TRUE(editor.scenario());
  // EP communication overlap needs experts: on a dense model the key reports it.
  ASSERT_TRUE(editor.set_field_text("/parallelism/ep_comm_overlap", "true"));
  EXPECT_EQ(editor.document()["parallelism"]["ep_comm_overlap"], true);
  EXPECT_FALSE(editor.scenario());
  EXPECT_TRUE(editor.field_problem("/parallelism/ep_comm_overlap").contains("expert parallelism"));
  editor.set_field_text("/parallelism/ep_comm_overlap", "");
  EXPECT_TRUE(editor.scenario());
  // Activation offloading is an integer; with recompute it is reported at the key.
  ASSERT_TRUE(editor.set_field_text("/parallelism/activation_offload_layers", "2"));
  EXPECT_EQ(editor.document()["parallelism"]["activation_offload_layers"], 2);
  ASSERT_TRUE(editor.set_field_text("/parallelism/activation_recompute", "full"));
  EXPECT_FALSE(editor.scenario());
  EXPECT_TRUE(editor.field_problem("/parallelism/activation_offload_layers").contains("recompute"));
  editor.set_field_text("/parallelism/activation_recompute", "");
  editor.set_field_text("/parallelism/activation_offload_layers", "");
  EXPECT_TRUE(editor.scenario());

  // A power limit turns the GPU named by its preset into the object form; another preset keeps
  // the limit, and one above the board's TDP is reported at the key.
  ASSERT_TRUE(editor.set_field_text("/cluster/gpu/power_limit_W", "300"));
  EXPECT_EQ(editor.document()["cluster"]["gpu"]["name"], "A100-80GB");
  EXPECT_EQ(editor.document()["cluster"]["gpu"]["power_limit_W"], 300);
  ASSERT_TRUE(editor.scenario());
  EXPECT_DOUBLE_EQ(editor.scenario()->cluster.gpu.power_limit_W, 300);
  EXPECT_EQ(editor.field_text("/cluster/gpu"), "A100-80GB");
  ASSERT_TRUE(editor.set_field_text("/cluster/gpu", "H100-SXM"));
  EXPECT_EQ(editor.document()["cluster"]["gpu"]["name"], "H100-SXM");
  EXPECT_EQ(editor.document()["cluster"]["gpu"]["power_limit_W"], 300);
  ASSERT_TRUE(editor.set_field_text("/cluster/gpu/power_limit_W", "800"));
  EXPECT_FALSE(editor.scenario());
  EXPECT_TRUE(editor.field_problem("/cluster/gpu/power_limit_W").contains("700 W"));
}

TEST(ScenarioEditor, SaveIsAtomicAndKeepsEditsOnFailure) {
  app();
  QTemporaryDir dir;
  ScenarioEditor editor;
  ASSERT_FALSE(editor.load_text(kValidScenario, dir.filePath("a.json")));
  editor.set_field_text("/training/global_batch_size", "64");
  ASSERT_TRUE(editor.modified());
  EXPECT_TRUE(editor.save_file(dir.filePath("missing-folder/a.json")));  // fails
  EXPECT_TRUE(editor.modified());
  EXPECT_FALSE(QFile::exists(dir.filePath("missing-folder/a.json")));
  ASSERT_FALSE(editor.save_file(dir.filePath("a.json")));
  EXPECT_FALSE(editor.modified());
  ScenarioEditor again;
  ASSERT_FALSE(again.load_file(dir.filePath("a.json")));
  EXPECT_EQ(again.field_text("/training/global_batch_size"), "64");
  EXPECT_TRUE(again.scenario());
  EXPECT_TRUE(again.load_file(dir.filePath("nope.json")));  // missing file: a problem
}

}  // namespace
}  // namespace monarch::gui
