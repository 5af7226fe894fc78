// Scenario editor: forms for model, cluster, training, parallelism and search over the
// scenario's JSON document. Every edit goes into the document as typed (a number when it
// reads as one, otherwise the text), then the document is validated by scenario_io exactly
// as the command line does, and each problem is shown at its field and in a list, with the
// command line's message. Bad input never discards the user's edits; keys the form does not
// cover are kept as they were in the file.
#pragma once

#include <QString>
#include <QWidget>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "core/problem.h"
#include "core/scenario.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPlainTextEdit;
class QTimer;

namespace monarch::gui {

class ScenarioEditor : public QWidget {
  Q_OBJECT
 public:
  enum class Kind { kInteger, kNumber, kText, kChoice, kEditableChoice };
  struct Field {
    QString section;  // "Model", "Cluster", ...
    QString label;
    std::vector<std::string> paths;  // JSON pointers; first is canonical, the rest aliases
    Kind kind = Kind::kInteger;
    QStringList choices;  // kChoice / kEditableChoice; "" first = absent
    QString tip;
    QWidget* widget = nullptr;
    QLabel* problem = nullptr;  // inline message under the field
  };

  explicit ScenarioEditor(QWidget* parent = nullptr);

  // Replaces the document with parsed JSON text. On a syntax error returns the problem (with
  // line and column) and keeps the current document and its edits untouched.
  std::optional<Problem> load_text(const std::string& text, const QString& path);
  // Reads a file into the editor (size-limited); the same guarantee on failure.
  std::optional<Problem> load_file(const QString& path);
  // Writes the document atomically (QSaveFile); on failure nothing is half-written.
  std::optional<Problem> save_file(const QString& path);

  const nlohmann::json& document() const { return doc_; }
  QString path() const { return path_; }
  bool modified() const { return modified_; }
  // The validated scenario, or nothing while the document has problems.
  const std::optional<Scenario>& scenario() const { return scenario_; }
  const Problems& problems() const { return problems_; }

  // Sets one form field by its canonical JSON pointer, as if typed ("" removes the key).
  // Returns false when no field has that path.
  bool set_field_text(const std::string& path, const QString& text);
  QString field_text(const std::string& path) const;
  // Inline problem text shown under a field ("" when none).
  QString field_problem(const std::string& path) const;

  // Validates now instead of after the typing pause.
  void validate_now();

 signals:
  void validated(bool ok);
  void modified_changed(bool modified);

 private:
  void build_forms();
  void refresh_widgets();
  void field_edited(Field& f);
  void show_problems();
  void show_resolved();
  Field* field_for(const std::string& path);
  const Field* field_for(const std::string& path) const;
  void set_modified(bool m);

  std::vector<Field> fields_;
  nlohmann::json doc_ = nlohmann::json::object();
  QString path_;
  bool modified_ = false;
  bool loading_ = false;
  std::optional<Scenario> scenario_;
  Problems problems_;
  QListWidget* problem_list_ = nullptr;
  QLabel* verdict_ = nullptr;
  QPlainTextEdit* json_view_ = nullptr;
  QTimer* validate_timer_ = nullptr;
};

}  // namespace monarch::gui
