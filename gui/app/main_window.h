// monarch-gui's main window: the scenario editor and the views over its results, a toolbar to
// open/save, search and simulate, and a progress bar with a cancel button for long work,
// which runs on a worker thread so the window never freezes.
#pragma once

#include <QFutureWatcher>
#include <QMainWindow>
#include <QStringList>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "core/result.h"
#include "gui/app/backends.h"

class QAction;
class QLabel;
class QProgressBar;
class QPushButton;
class QTabWidget;
class QTimer;

namespace monarch::gui {

class CommunicationView;
class CompareView;
class MemoryView;
class PlanSpaceView;
class PlansView;
class ReliabilityView;
class ScenarioEditor;
class TimelineView;
class WhatIfView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  // The views, in tab order; screenshot files are named after them.
  static const QStringList& view_names();

  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Opens a scenario file into the editor. On failure shows the message in the window and
  // returns it; the current document and its edits stay.
  std::optional<Problem> open_scenario(const QString& path);
  // Starts the search of the editor's scenario on a worker thread; false (with a message)
  // when the scenario has problems or work is already running.
  bool start_search();
  // Simulates the selected plan with SimGrid on a worker thread.
  bool start_simulation();
  void cancel_work();
  bool busy() const { return job_ != nullptr; }
  // Spins the event loop until the running work ends (tests and --screenshot).
  void wait_for_work();

  // Shows view `name` (one of view_names()); false when unknown.
  bool show_view(const QString& name);
  QWidget* view(const QString& name) const;
  // Writes DIR/<view>.png for every view, scaled to `width_px` wide when > 0 (smooth); returns
  // the problems (empty on success).
  Problems save_screenshots(const QString& dir, int width_px = 0);

  // The message line at the top of the window (errors, results of actions).
  QString message() const;

  // The results store whose runs the Compare view offers ("" = none).
  void set_store_path(const QString& path);
  QString store_path() const { return store_path_; }

  ScenarioEditor* editor() const { return editor_; }
  PlansView* plans() const { return plans_; }
  PlanSpaceView* plan_space() const { return plan_space_; }
  TimelineView* timeline() const { return timeline_; }
  MemoryView* memory() const { return memory_; }
  CommunicationView* communication() const { return communication_; }
  CompareView* compare() const { return compare_; }
  WhatIfView* whatif() const { return whatif_; }
  ReliabilityView* reliability() const { return reliability_; }

 protected:
  void closeEvent(QCloseEvent*) override;

 signals:
  void work_cancelled();

 private:
  struct Job;
  void show_message(const QString& text, bool error);
  void select_plan(int row);
  // Selects a plan of the plan space: its row when the search ranked it, else the analytical
  // model's full result for it.
  void select_plan_value(const Plan& plan);
  // The newest measured run of `plan` in the results store, when there is one (kept for the
  // last plan asked about).
  const BackendResult* measured_run_of(const Plan& plan);
  // Shows one selected result in the memory, communication, what-if and timeline views.
  void show_selected(const BackendResult& r, const QString& title);
  void refresh_compare_runs();
  void update_actions();
  void update_title();
  bool confirm_discard();
  void open_dialog();
  bool save_as_dialog();
  bool save();
  void start_job(const QString& what, std::function<std::function<void()>(JobControl&)> work);
  void job_finished();

  ScenarioEditor* editor_;
  PlansView* plans_;
  PlanSpaceView* plan_space_;
  TimelineView* timeline_;
  MemoryView* memory_;
  CommunicationView* communication_;
  CompareView* compare_;
  WhatIfView* whatif_;
  ReliabilityView* reliability_;
  QTabWidget* tabs_;
  QLabel* message_;
  QProgressBar* progress_;
  QPushButton* cancel_;
  QAction* search_action_;
  QAction* simulate_action_;
  QTimer* progress_timer_;

  std::optional<Scenario> searched_scenario_;  // the scenario the plans belong to
  std::vector<BackendResult> simulated_;       // SimGrid results of this session
  std::optional<BackendResult> whatif_result_;
  int selected_plan_ = -1;                      // row of the selected plan in the ranked table, -1: none
  std::optional<BackendResult> selected_result_;  // the selected plan's analytical result
  QString store_path_;
  std::optional<BackendResult> baseline_;  // FSDP baseline of the last search
  std::optional<Plan> compare_paired_plan_;
  struct MeasuredLookup {
    Plan plan;
    QString store;
    std::optional<BackendResult> run;
    QString label;
  };
  std::optional<MeasuredLookup> measured_lookup_;  // the selected plan the Compare view last paired with a measured run
  std::unique_ptr<Job> job_;
};

}  // namespace monarch::gui
