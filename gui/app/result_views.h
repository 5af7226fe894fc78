// Views over one finished result (memory, communication) and over a ranked search (plans).
#pragma once

#include <QWidget>

#include "core/result.h"
#include "gui/models/communication_model.h"
#include "gui/models/memory_model.h"
#include <optional>

#include "core/framework_bridge.h"
#include "gui/models/plans_model.h"

class QCheckBox;
class QLabel;
class QLineEdit;
class QTableView;
class QTabWidget;
class QToolButton;
class QChart;
class QChartView;

namespace monarch::gui {

// Ranked plans (sortable, filterable) and rejected plans with reasons, in two tabs.
class PlansView : public QWidget {
  Q_OBJECT
 public:
  explicit PlansView(QWidget* parent = nullptr);
  void set_search(std::vector<BackendResult> ranked, std::vector<RejectedPlan> rejected);
  PlansModel* model() const { return model_; }
  PlansFilterModel* proxy() const { return proxy_; }
  RejectedModel* rejected_model() const { return rejected_; }
  QTableView* table() const { return table_; }
  QTabWidget* tabs() const { return tabs_; }
  // Row in model() of the selected plan, -1 when none.
  int selected_row() const;
  void select_row(int model_row);

  // The scenario the ranked plans belong to; "Export as ..." needs it.
  void set_scenario(std::optional<Scenario> scenario);
  QToolButton* export_button() const { return export_button_; }
  // The selected plan in a framework's config (core/framework_bridge.h).
  Expected<ExportedConfig> export_selected(ConfigFormat format) const;
  // Writes export_selected(format) to `path` (QSaveFile: nothing half-written); "" or the error.
  QString save_export(ConfigFormat format, const QString& path) const;

 signals:
  void plan_selected(int model_row);

 private:
  void update_export_button();
  void ask_and_export(ConfigFormat format);

  std::optional<Scenario> scenario_;
  QToolButton* export_button_;
  PlansModel* model_;
  PlansFilterModel* proxy_;
  RejectedModel* rejected_;
  QTableView* table_;
  QTableView* rejected_table_;
  QTabWidget* tabs_;
  QLabel* summary_;
};

// Stacked bars per pipeline stage (weights, gradients, optimizer, activations, buffers) with
// the GPU's usable capacity as a line, and the numbers in a table below.
class MemoryView : public QWidget {
  Q_OBJECT
 public:
  explicit MemoryView(QWidget* parent = nullptr);
  void show_result(const BackendResult& result, const QString& title);
  // The memory timeline of a simulation (per stage, its busiest rank, the peak marked); a
  // result without one (the analytical model) shows why there is none.
  void show_memory_timeline(const BackendResult& result, const QString& title);
  void clear_memory_timeline(const QString& why);
  MemoryModel* model() const { return model_; }
  QChartView* chart_view() const { return chart_view_; }
  QChartView* timeline_view() const { return timeline_view_; }
  const std::vector<MemoryCurve>& curves() const { return curves_; }

 private:
  MemoryModel* model_;
  QChartView* chart_view_;
  QChartView* timeline_view_;
  std::vector<MemoryCurve> curves_;
  QTableView* table_;
};

// Bytes, operations, time, algbw and busbw per (collective kind, group), with a bar chart of
// the time per entry.
class CommunicationView : public QWidget {
  Q_OBJECT
 public:
  explicit CommunicationView(QWidget* parent = nullptr);
  void show_result(const BackendResult& result, const QString& title);
  CommunicationModel* model() const { return model_; }

 private:
  CommunicationModel* model_;
  QTableView* table_;
  QChartView* chart_view_;
  QLabel* title_;
};

}  // namespace monarch::gui
