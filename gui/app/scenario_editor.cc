#include "gui/app/scenario_editor.h"

#include <QComboBox>
#include <QFile>
#include <QFileInfo>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QSaveFile>
#include <QScrollArea>
#include <QSplitter>
#include <QTimer>
#include <QVBoxLayout>

#include "core/presets.h"
#include "core/scenario_io.h"

namespace monarch::gui {
namespace {

using json = nlohmann::json;

// Pause after the last keystroke before the document is validated again.
constexpr int kValidateDelayMs = 150;

QStringList with_empty(const std::vector<std::string>& names) {
  QStringList out{QString()};
  for (const std::string& n : names) out << QString::fromStdString(n);
  return out;
}

QString json_to_text(const json& v) {
  if (v.is_string()) return QString::fromStdString(v.get<std::string>());
  if (v.is_null()) return {};
  return QString::fromStdString(v.dump());
}

// The JSON value of a field's text: numbers where the text reads as one (so the validator
// sees what a file would hold), booleans for true/false choices, the text otherwise.
json text_to_json(const QString& raw, ScenarioEditor::Kind kind) {
  const QString text = raw.trimmed();
  if (kind == ScenarioEditor::Kind::kInteger || kind == ScenarioEditor::Kind::kNumber) {
    bool ok = false;
    const qlonglong i = text.toLongLong(&ok);
    if (ok) return json(static_cast<int64_t>(i));
    const double d = text.toDouble(&ok);
    if (ok) return json(d);
  }
  if (kind == ScenarioEditor::Kind::kChoice) {
    if (text == QLatin1String("true")) return json(true);
    if (text == QLatin1String("false")) return json(false);
  }
  return json(text.toStdString());
}

QString widget_text(const QWidget* w) {
  if (auto* e = qobject_cast<const QLineEdit*>(w)) return e->text();
  if (auto* c = qobject_cast<const QComboBox*>(w)) return c->currentText();
  return {};
}

void set_widget_text(QWidget* w, const QString& text) {
  const QSignalBlocker block(w);
  if (auto* e = qobject_cast<QLineEdit*>(w)) {
    e->setText(text);
  } else if (auto* c = qobject_cast<QComboBox*>(w)) {
    const int i = c->findText(text);
    if (i >= 0) {
      c->setCurrentIndex(i);
    } else if (c->isEditable()) {
      c->setEditText(text);
    } else {
      c->addItem(text);  // a value the file holds that is not a known choice: keep it visible
      c->setCurrentIndex(c->count() - 1);
    }
  }
}

}  // namespace

ScenarioEditor::ScenarioEditor(QWidget* parent) : QWidget(parent) {
  validate_timer_ = new QTimer(this);
  validate_timer_->setSingleShot(true);
  validate_timer_->setInterval(kValidateDelayMs);
  connect(validate_timer_, &QTimer::timeout, this, &ScenarioEditor::validate_now);
  build_forms();
  refresh_widgets();
  validate_now();
}

void ScenarioEditor::build_forms() {
  using K = Kind;
  auto f = [this](const char* section, const char* label, std::vector<std::string> paths, Kind kind,
                  QStringList choices = {}, const char* tip = "") {
    Field fd;
    fd.section = QLatin1String(section);
    fd.label = QLatin1String(label);
    fd.paths = std::move(paths);
    fd.kind = kind;
    fd.choices = std::move(choices);
    fd.tip = QLatin1String(tip);
    fields_.push_back(std::move(fd));
  };
  const QStringList none_true_false{QString(), QStringLiteral("true"), QStringLiteral("false")};
  f("Scenario", "name", {"/name"}, K::kText);
  f("Model", "preset", {"/model/preset"}, K::kEditableChoice, with_empty(model_preset_names()),
    "named model; keys below override it");
  f("Model", "architecture", {"/model/architecture"}, K::kChoice, {QString(), "gpt", "llama", "dlrm"});
  f("Model", "num_layers", {"/model/num_layers"}, K::kInteger);
  f("Model", "hidden_size", {"/model/hidden_size"}, K::kInteger);
  f("Model", "num_attention_heads", {"/model/num_attention_heads"}, K::kInteger);
  f("Model", "num_kv_heads", {"/model/num_kv_heads"}, K::kInteger, {}, "default = num_attention_heads");
  f("Model", "ffn_hidden_size", {"/model/ffn_hidden_size"}, K::kInteger, {}, "default 4 x hidden for gpt");
  f("Model", "vocab_size", {"/model/vocab_size"}, K::kInteger);
  f("Model", "seq_length", {"/model/seq_length"}, K::kInteger, {}, "tokens per sample");
  f("Model", "num_experts", {"/model/num_experts"}, K::kInteger, {}, "mixture of experts; empty = dense");
  f("Model", "moe_top_k", {"/model/moe_top_k"}, K::kInteger);
  f("Model", "qk_layernorm", {"/model/qk_layernorm"}, K::kChoice, none_true_false,
    "a norm on every head's query and key (Qwen3, Megatron --qk-layernorm); empty = none");
  f("Cluster", "gpu", {"/cluster/gpu"}, K::kEditableChoice, with_empty(gpu_preset_names()));
  f("Cluster", "num_gpus", {"/cluster/num_gpus"}, K::kInteger);
  f("Cluster", "gpus_per_node", {"/cluster/gpus_per_node"}, K::kInteger);
  f("Cluster", "GPU power limit W", {"/cluster/gpu/power_limit_W"}, K::kNumber, {},
    "a cap below the board's TDP: the tensor cores' clock drops as (limit / TDP)^(1/3); empty = the TDP");
  f("Cluster", "intra-node GB/s", {"/cluster/intra_node/bandwidth_GBps"}, K::kNumber, {}, "per GPU, per direction (NVLink)");
  f("Cluster", "intra-node latency us", {"/cluster/intra_node/latency_us"}, K::kNumber);
  f("Cluster", "inter-node GB/s", {"/cluster/inter_node/bandwidth_GBps"}, K::kNumber, {}, "per NIC, per direction");
  f("Cluster", "NICs per node", {"/cluster/inter_node/nics_per_node"}, K::kInteger);
  f("Cluster", "inter-node latency us", {"/cluster/inter_node/latency_us"}, K::kNumber);
  f("Cluster", "topology", {"/cluster/inter_node/topology"}, K::kChoice,
    {QString(), "fat-tree", "rail-optimized", "star"});
  f("Cluster", "oversubscription", {"/cluster/inter_node/oversubscription"}, K::kNumber, {}, ">= 1; 1 = full bisection");
  f("Training", "global_batch_size", {"/training/global_batch_size"}, K::kInteger, {}, "samples per optimizer step");
  f("Training", "micro_batch_size", {"/training/micro_batch_size"}, K::kInteger, {}, "empty = searched");
  f("Training", "precision", {"/training/precision"}, K::kChoice, {QString(), "fp32", "bf16", "fp16", "fp8"});
  f("Training", "optimizer", {"/training/optimizer"}, K::kChoice, {QString(), "adam", "sgd"});
  f("Training", "steps", {"/training/steps"}, K::kInteger);
  f("Training", "seed", {"/training/seed"}, K::kInteger);
  f("Training", "framework", {"/training/framework"}, K::kChoice, {QString(), "megatron", "deepspeed", "torchtitan"},
    "the stack that runs the plan; default megatron");
  f("Training", "cuda_graphs", {"/training/cuda_graphs"}, K::kChoice, none_true_false,
    "layers replayed as CUDA graphs (Megatron only); default false");
  f("Training", "compile", {"/training/compile"}, K::kChoice, none_true_false,
    "blocks compiled by torch.compile (torchtitan only); default false");
  f("Training", "grad_reduce_in_fp32", {"/training/grad_reduce_in_fp32"}, K::kChoice, none_true_false,
    "gradients reduced in fp32 (true) or the 16-bit type (false); empty = the framework's default");
  f("Training", "cross_entropy_loss_fusion", {"/training/cross_entropy_loss_fusion"}, K::kChoice, none_true_false,
    "Megatron's fused cross entropy (true) or Megatron-LM's unfused default (false); empty = fused");
  f("Training", "fp8_recipe", {"/training/fp8_recipe"}, K::kChoice, {QString(), "delayed", "tensorwise", "mxfp8", "blockwise"},
    "how fp8 tensors are scaled (fp8 only); empty = the framework's default (megatron delayed, torchtitan tensorwise)");
  auto deg = [](const char* canonical, const char* a, const char* b) {
    return std::vector<std::string>{std::string("/parallelism/") + canonical, std::string("/parallelism/") + a,
                                    std::string("/parallelism/") + b};
  };
  f("Parallelism", "tensor (tp)", deg("tensor_parallel_degree", "tp", "tensor_model_parallel_size"), K::kInteger, {}, "empty = searched");
  f("Parallelism", "pipeline (pp)", deg("pipeline_parallel_degree", "pp", "pipeline_model_parallel_size"), K::kInteger, {}, "empty = searched");
  f("Parallelism", "data (dp)", deg("data_parallel_degree", "dp", "data_parallel_size"), K::kInteger, {}, "empty or -1 = num_gpus / (tp x pp x cp)");
  f("Parallelism", "context (cp)", deg("context_parallel_degree", "cp", "context_parallel_size"), K::kInteger);
  f("Parallelism", "expert (ep)", deg("expert_parallel_degree", "ep", "expert_model_parallel_size"), K::kInteger);
  f("Parallelism", "virtual pipeline (vpp)", deg("virtual_pipeline_degree", "vpp", "virtual_pipeline_model_parallel_size"), K::kInteger);
  f("Parallelism", "pipeline_schedule", {"/parallelism/pipeline_schedule"}, K::kChoice,
    {QString(), "gpipe", "1f1b", "interleaved-1f1b"});
  f("Parallelism", "sequence_parallel", {"/parallelism/sequence_parallel"}, K::kChoice, none_true_false);
  f("Parallelism", "activation_recompute", {"/parallelism/activation_recompute"}, K::kChoice,
    {QString(), "none", "selective", "full"});
  f("Parallelism", "zero_stage", {"/parallelism/zero_stage"}, K::kInteger, {}, "0..3");
  f("Parallelism", "ep_comm_overlap", {"/parallelism/ep_comm_overlap"}, K::kChoice, none_true_false,
    "MoE all-to-alls beside another micro-batch's compute (Megatron's combined 1F1B); empty = searched");
  f("Parallelism", "activation_offload_layers", {"/parallelism/activation_offload_layers"}, K::kInteger, {},
    "layers whose activations go to host memory (Megatron --cpu-offloading-num-layers; pp 1, no recompute); "
    "empty = searched");
  f("Search", "top_k", {"/search/top_k"}, K::kInteger);
  f("Search", "objective", {"/search/objective"}, K::kChoice, {QString(), "iteration_time", "memory"});

  // Widgets.
  auto* outer = new QVBoxLayout(this);
  verdict_ = new QLabel(this);
  verdict_->setWordWrap(true);
  outer->addWidget(verdict_);
  auto* split = new QSplitter(Qt::Horizontal, this);
  auto* scroll = new QScrollArea(split);
  scroll->setWidgetResizable(true);
  auto* forms = new QWidget(scroll);
  auto* grid = new QGridLayout(forms);
  QGroupBox* box = nullptr;
  QFormLayout* form = nullptr;
  int box_index = 0;
  for (Field& fd : fields_) {
    if (!box || box->title() != fd.section) {
      box = new QGroupBox(fd.section, forms);
      form = new QFormLayout(box);
      form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
      // Column 0: scenario, model, cluster; column 1: training, parallelism, search.
      const bool right = fd.section == QLatin1String("Training") || fd.section == QLatin1String("Parallelism") ||
                         fd.section == QLatin1String("Search");
      if (fd.section == QLatin1String("Scenario")) {
        grid->addWidget(box, 0, 0, 1, 2);  // the name spans both columns
      } else {
        grid->addWidget(box, 1 + (right ? box_index - 3 : box_index - 1), right ? 1 : 0,
                        Qt::AlignTop);
      }
      ++box_index;
    }
    auto* cell = new QWidget(box);
    auto* v = new QVBoxLayout(cell);
    v->setContentsMargins(0, 0, 0, 0);
    v->setSpacing(1);
    if (fd.kind == Kind::kChoice || fd.kind == Kind::kEditableChoice) {
      auto* c = new QComboBox(cell);
      c->setEditable(fd.kind == Kind::kEditableChoice);
      c->addItems(fd.choices);
      if (c->isEditable()) c->setInsertPolicy(QComboBox::NoInsert);
      fd.widget = c;
    } else {
      auto* e = new QLineEdit(cell);
      e->setClearButtonEnabled(true);
      fd.widget = e;
    }
    fd.widget->setObjectName(QString::fromStdString(fd.paths.front()));
    QString tip = QString::fromStdString(fd.paths.front());
    if (!fd.tip.isEmpty()) tip += QStringLiteral(": ") + fd.tip;
    fd.widget->setToolTip(tip);
    if (auto* e = qobject_cast<QLineEdit*>(fd.widget); e && !fd.tip.isEmpty()) e->setPlaceholderText(fd.tip);
    fd.problem = new QLabel(cell);
    fd.problem->setWordWrap(true);
    fd.problem->setStyleSheet(QStringLiteral("color: #b41e1e;"));
    fd.problem->hide();
    v->addWidget(fd.widget);
    v->addWidget(fd.problem);
    form->addRow(fd.label, cell);
  }
  grid->setRowStretch(grid->rowCount(), 1);
  scroll->setWidget(forms);
  json_view_ = new QPlainTextEdit(split);
  json_view_->setReadOnly(true);
  json_view_->setLineWrapMode(QPlainTextEdit::NoWrap);
  json_view_->setToolTip(QStringLiteral("The document as it will be saved (keys the form does not show are kept)"));
  split->addWidget(scroll);
  split->addWidget(json_view_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  outer->addWidget(split, 1);
  outer->addWidget(new QLabel(QStringLiteral("Problems (the same messages as monarch-sim):"), this));
  problem_list_ = new QListWidget(this);
  problem_list_->setMaximumHeight(80);
  outer->addWidget(problem_list_);
  connect(problem_list_, &QListWidget::itemActivated, this, [this](QListWidgetItem* item) {
    if (Field* fd = field_for(item->data(Qt::UserRole).toString().toStdString())) fd->widget->setFocus();
  });

  // Edits.
  for (Field& fd : fields_) {
    Field* p = &fd;
    if (auto* e = qobject_cast<QLineEdit*>(fd.widget)) {
      connect(e, &QLineEdit::textEdited, this, [this, p] { field_edited(*p); });
    } else if (auto* c = qobject_cast<QComboBox*>(fd.widget)) {
      connect(c, &QComboBox::currentTextChanged, this, [this, p] { field_edited(*p); });
    }
  }
}

// The field whose key is the problem's path or its closest parent (the GPU's power limit, not
// the GPU).
ScenarioEditor::Field* ScenarioEditor::field_for(const std::string& path) {
  Field* best = nullptr;
  size_t best_len = 0;
  for (Field& fd : fields_)
    for (const std::string& p : fd.paths)
      if ((path == p || path.rfind(p + "/", 0) == 0) && p.size() > best_len) {
        best = &fd;
        best_len = p.size();
      }
  return best;
}

const ScenarioEditor::Field* ScenarioEditor::field_for(const std::string& path) const {
  return const_cast<ScenarioEditor*>(this)->field_for(path);
}

void ScenarioEditor::refresh_widgets() {
  loading_ = true;
  for (Field& fd : fields_) {
    QString text;
    for (const std::string& p : fd.paths) {
      const json::json_pointer ptr(p);
      if (!doc_.contains(ptr)) continue;
      const json& v = doc_.at(ptr);
      if (v.is_object() && v.contains("name") && v["name"].is_string())
        text = QString::fromStdString(v["name"].get<std::string>());  // a GPU given as an object
      else
        text = json_to_text(v);
      break;
    }
    set_widget_text(fd.widget, text);
  }
  loading_ = false;
  json_view_->setPlainText(QString::fromStdString(doc_.dump(2)));
}

void ScenarioEditor::field_edited(Field& fd) {
  if (loading_) return;
  // Write where the file already has the key (an alias stays an alias), else the canonical key.
  std::string target = fd.paths.front();
  for (const std::string& p : fd.paths)
    if (doc_.contains(json::json_pointer(p))) {
      target = p;
      break;
    }
  const json::json_pointer ptr(target);
  const QString text = widget_text(fd.widget).trimmed();
  try {
    if (target.rfind("/cluster/gpu/", 0) == 0) gpu_as_object(doc_);  // a key inside the GPU (its power limit)
    if (target == "/cluster/gpu" && doc_.contains(ptr) && doc_.at(ptr).is_object() && !text.isEmpty()) {
      doc_[ptr]["name"] = text.toStdString();  // another preset for a GPU given as an object: its other keys stay
    } else if (text.isEmpty()) {
      if (doc_.contains(ptr)) doc_[ptr.parent_pointer()].erase(ptr.back());
    } else {
      doc_[ptr] = text_to_json(text, fd.kind);
    }
  } catch (const json::exception&) {
    // A parent in the file is not an object (e.g. "cluster": 5): the edit cannot be stored;
    // the validator already names that parent.
    fd.problem->setText(QStringLiteral("cannot store this value: a parent of %1 in the file is not an object")
                            .arg(QString::fromStdString(target)));
    fd.problem->show();
    return;
  }
  set_modified(true);
  json_view_->setPlainText(QString::fromStdString(doc_.dump(2)));
  validate_timer_->start();
}

bool ScenarioEditor::set_field_text(const std::string& path, const QString& text) {
  Field* fd = nullptr;
  for (Field& f : fields_)
    if (f.paths.front() == path) fd = &f;
  if (!fd) return false;
  set_widget_text(fd->widget, text);
  field_edited(*fd);
  validate_now();
  return true;
}

QString ScenarioEditor::field_text(const std::string& path) const {
  for (const Field& f : fields_)
    if (f.paths.front() == path) return widget_text(f.widget);
  return {};
}

QString ScenarioEditor::field_problem(const std::string& path) const {
  for (const Field& f : fields_)
    if (f.paths.front() == path) return f.problem->text();
  return {};
}

void ScenarioEditor::validate_now() {
  validate_timer_->stop();
  const QString base = path_.isEmpty() ? QStringLiteral(".") : QFileInfo(path_).absolutePath();
  try {
    Expected<Scenario> s = scenario_from_json(doc_, base.toStdString());
    if (s.ok()) {
      scenario_ = std::move(s.value());
      scenario_->source_path = path_.toStdString();
      problems_.clear();
    } else {
      scenario_.reset();
      problems_ = s.problems();
    }
  } catch (const std::exception& e) {  // scenario_io returns problems; this is a last guard
    scenario_.reset();
    problems_ = {Problem{"", std::string("internal error while validating: ") + e.what()}};
  }
  show_problems();
  show_resolved();
  emit validated(scenario_.has_value());
}

void ScenarioEditor::show_resolved() {
  // Empty fields show what the scenario resolves them to (presets, defaults), or their hint.
  json resolved;
  if (scenario_) {
    try {
      resolved = scenario_to_json(*scenario_);
    } catch (const std::exception&) {
      resolved = json();
    }
  }
  for (Field& fd : fields_) {
    auto* e = qobject_cast<QLineEdit*>(fd.widget);
    if (!e) continue;
    QString hint = fd.tip;
    const json::json_pointer ptr(fd.paths.front());
    if (resolved.is_object() && resolved.contains(ptr) && !resolved.at(ptr).is_null() && !resolved.at(ptr).is_object())
      hint = QStringLiteral("%1 (resolved)").arg(json_to_text(resolved.at(ptr)));
    e->setPlaceholderText(hint);
  }
}

void ScenarioEditor::show_problems() {
  for (Field& fd : fields_) {
    fd.problem->clear();
    fd.problem->hide();
    fd.widget->setStyleSheet(QString());
  }
  problem_list_->clear();
  for (const Problem& p : problems_) {
    auto* item = new QListWidgetItem(QString::fromStdString(p.to_string()), problem_list_);
    item->setData(Qt::UserRole, QString::fromStdString(p.where));
    item->setForeground(QColor(180, 30, 30));
    if (Field* fd = field_for(p.where)) {
      QString text = fd->problem->text();
      if (!text.isEmpty()) text += QLatin1Char('\n');
      fd->problem->setText(text + QString::fromStdString(p.message));
      fd->problem->show();
      fd->widget->setStyleSheet(QStringLiteral("border: 1px solid #b41e1e;"));
    }
  }
  if (problems_.empty()) {
    verdict_->setText(QStringLiteral("<span style='color:#1e7d32'>Scenario is valid.</span> %1")
                          .arg(path_.isEmpty() ? QStringLiteral("(not saved yet)") : path_.toHtmlEscaped()));
  } else {
    verdict_->setText(QStringLiteral("<span style='color:#b41e1e'>%1 problem(s); fix them to search. "
                                     "Your edits are kept.</span> %2")
                          .arg(problems_.size())
                          .arg(path_.toHtmlEscaped()));
  }
}

void ScenarioEditor::set_modified(bool m) {
  if (m == modified_) return;
  modified_ = m;
  emit modified_changed(m);
}

std::optional<Problem> ScenarioEditor::load_text(const std::string& text, const QString& path) {
  Expected<json> parsed = parse_json_text(text, QFileInfo(path).fileName().toStdString());
  if (!parsed.ok()) return parsed.problems().front();
  if (!parsed->is_object())
    return Problem{"/", "found a JSON " + std::string(parsed->type_name()) + ", expected an object (a scenario)"};
  doc_ = std::move(parsed.value());
  path_ = path;
  refresh_widgets();
  set_modified(false);
  validate_now();
  return std::nullopt;
}

std::optional<Problem> ScenarioEditor::load_file(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly))
    return Problem{path.toStdString(), "cannot open: " + file.errorString().toStdString()};
  if (file.size() > kMaxScenarioFileBytes)
    return Problem{path.toStdString(), "file is " + std::to_string(file.size()) + " bytes, a scenario is at most " +
                                           std::to_string(kMaxScenarioFileBytes)};
  const QByteArray bytes = file.readAll();
  return load_text(bytes.toStdString(), path);
}

std::optional<Problem> ScenarioEditor::save_file(const QString& path) {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly))
    return Problem{path.toStdString(), "cannot write: " + file.errorString().toStdString()};
  const std::string text = doc_.dump(2) + "\n";
  file.write(text.data(), static_cast<qint64>(text.size()));
  if (!file.commit()) return Problem{path.toStdString(), "cannot write: " + file.errorString().toStdString()};
  path_ = path;
  set_modified(false);
  show_problems();
  return std::nullopt;
}

}  // namespace monarch::gui
