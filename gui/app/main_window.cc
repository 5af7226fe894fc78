#include "gui/app/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QEventLoop>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QToolBar>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include "gui/app/compare_view.h"
#include "gui/app/plan_space_view.h"
#include "gui/app/reliability_view.h"
#include "gui/app/result_views.h"
#include "gui/app/scenario_editor.h"
#include "gui/app/timeline_view.h"
#include "gui/app/whatif_view.h"
#include "gui/models/format.h"

namespace monarch::gui {

// Work on a worker thread. The worker returns a closure that applies its result on the UI
// thread; a cancelled job's closure is dropped (the worker stops at its next check).
struct MainWindow::Job {
  QString what;
  std::shared_ptr<JobControl> control = std::make_shared<JobControl>();
  QFutureWatcher<std::function<void()>> watcher;
};

const QStringList& MainWindow::view_names() {
  static const QStringList kNames{QStringLiteral("scenario"), QStringLiteral("plans"),
                                  QStringLiteral("planspace"), QStringLiteral("timeline"), QStringLiteral("memory"),
                                  QStringLiteral("communication"), QStringLiteral("compare"),
                                  QStringLiteral("whatif"), QStringLiteral("reliability")};
  return kNames;
}

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  editor_ = new ScenarioEditor(this);
  plans_ = new PlansView(this);
  plan_space_ = new PlanSpaceView(this);
  timeline_ = new TimelineView(this);
  memory_ = new MemoryView(this);
  communication_ = new CommunicationView(this);
  compare_ = new CompareView(this);
  connect(compare_, &CompareView::timeline_requested, this, [this](const BackendResult& r, const QString& title) {
    timeline_->show_result(r, title);
    tabs_->setCurrentWidget(timeline_);
  });
  whatif_ = new WhatIfView(&estimate, this);
  whatif_->set_sweeper(&run_sweep, simgrid_built());
  reliability_ = new ReliabilityView(this);

  auto* central = new QWidget(this);
  auto* layout = new QVBoxLayout(central);
  layout->setContentsMargins(4, 4, 4, 4);
  message_ = new QLabel(central);
  message_->setWordWrap(true);
  message_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  message_->hide();
  layout->addWidget(message_);
  tabs_ = new QTabWidget(central);
  tabs_->addTab(editor_, QStringLiteral("Scenario"));
  tabs_->addTab(plans_, QStringLiteral("Plans"));
  tabs_->addTab(plan_space_, QStringLiteral("Plan space"));
  tabs_->addTab(timeline_, QStringLiteral("Timeline"));
  tabs_->addTab(memory_, QStringLiteral("Memory"));
  tabs_->addTab(communication_, QStringLiteral("Communication"));
  tabs_->addTab(compare_, QStringLiteral("Compare"));
  tabs_->addTab(whatif_, QStringLiteral("What-if"));
  tabs_->addTab(reliability_, QStringLiteral("Reliability"));
  layout->addWidget(tabs_, 1);
  setCentralWidget(central);

  // Actions.
  auto* file = menuBar()->addMenu(QStringLiteral("&File"));
  auto* open = file->addAction(QStringLiteral("&Open scenario..."), this, &MainWindow::open_dialog);
  open->setShortcut(QKeySequence::Open);
  auto* save_action = file->addAction(QStringLiteral("&Save"), this, [this] { save(); });
  save_action->setShortcut(QKeySequence::Save);
  file->addAction(QStringLiteral("Save &as..."), this, [this] { save_as_dialog(); });
  file->addAction(QStringLiteral("Open results s&tore..."), this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, QStringLiteral("Open results store"), store_path_,
                                                      QStringLiteral("monarch-sim stores (*.db);;All files (*)"));
    if (!path.isEmpty()) set_store_path(path);
  });
  file->addSeparator();
  file->addAction(QStringLiteral("&Quit"), this, &QWidget::close)->setShortcut(QKeySequence::Quit);
  auto* run = menuBar()->addMenu(QStringLiteral("&Run"));
  search_action_ = run->addAction(QStringLiteral("&Search plans"), this, [this] { start_search(); });
  search_action_->setShortcut(Qt::CTRL | Qt::Key_R);
  simulate_action_ = run->addAction(QStringLiteral("Simulate selected plan with Sim&Grid"), this,
                                    [this] { start_simulation(); });
  auto* bar = addToolBar(QStringLiteral("Main"));
  bar->setMovable(false);
  bar->addAction(open);
  bar->addAction(save_action);
  bar->addSeparator();
  bar->addAction(search_action_);
  bar->addAction(simulate_action_);

  progress_ = new QProgressBar(this);
  progress_->setMaximumWidth(220);
  progress_->setRange(0, 1000);
  progress_->hide();
  cancel_ = new QPushButton(QStringLiteral("Cancel"), this);
  cancel_->hide();
  statusBar()->addPermanentWidget(progress_);
  statusBar()->addPermanentWidget(cancel_);
  connect(cancel_, &QPushButton::clicked, this, &MainWindow::cancel_work);
  progress_timer_ = new QTimer(this);
  progress_timer_->setInterval(100);
  connect(progress_timer_, &QTimer::timeout, this, [this] {
    if (!job_) return;
    const double f = job_->control->fraction.load();
    if (f < 0) {
      progress_->setRange(0, 0);  // busy indicator
    } else {
      progress_->setRange(0, 1000);
      progress_->setValue(static_cast<int>(f * 1000));
    }
  });

  connect(editor_, &ScenarioEditor::validated, this, [this] { update_actions(); });
  connect(editor_, &ScenarioEditor::modified_changed, this, [this] { update_title(); });
  connect(plans_, &PlansView::plan_selected, this, &MainWindow::select_plan);
  connect(plan_space_, &PlanSpaceView::plan_chosen, this, &MainWindow::select_plan_value);
  connect(whatif_, &WhatIfView::result_changed, this, [this](const BackendResult& r) {
    whatif_result_ = r;
    memory_->show_result(r, QStringLiteral("what-if %1").arg(plan_summary(r.plan)));
    communication_->show_result(r, QStringLiteral("what-if %1").arg(plan_summary(r.plan)));
  });
  connect(tabs_, &QTabWidget::currentChanged, this, [this] {
    if (tabs_->currentWidget() == compare_) refresh_compare_runs();
  });
  compare_->set_loader([this](int64_t id) { return load_store_run(store_path_.toStdString(), id); });
  const QString default_store = QString::fromStdString(default_store_path());
  if (QFileInfo::exists(default_store)) store_path_ = default_store;
  update_actions();
  update_title();
  resize(1400, 900);
}

void MainWindow::set_store_path(const QString& path) {
  store_path_ = path;
  refresh_compare_runs();
  if (!path.isEmpty()) tabs_->setCurrentWidget(compare_);
}

MainWindow::~MainWindow() {
  if (job_) job_->control->cancel = true;
}

void MainWindow::show_message(const QString& text, bool error) {
  message_->setText(text);
  message_->setStyleSheet(error ? QStringLiteral("background:#fde2e2; color:#8a1010; padding:4px;")
                                : QStringLiteral("background:#e3f1e3; color:#16501c; padding:4px;"));
  message_->setVisible(!text.isEmpty());
  statusBar()->showMessage(text.section(QLatin1Char('\n'), 0, 0), 8000);
}

QString MainWindow::message() const { return message_->isHidden() ? QString() : message_->text(); }

void MainWindow::update_actions() {
  const bool idle = !job_;
  search_action_->setEnabled(idle && editor_->scenario().has_value());
  simulate_action_->setEnabled(idle && simgrid_built() && searched_scenario_ && selected_result_);
  simulate_action_->setToolTip(simgrid_built() ? QStringLiteral("Simulate the selected plan with SimGrid")
                                               : QStringLiteral("This build has no SimGrid backend"));
}

void MainWindow::update_title() {
  const QString name = editor_->path().isEmpty() ? QStringLiteral("untitled") : QFileInfo(editor_->path()).fileName();
  setWindowTitle(QStringLiteral("%1%2 — monarch-gui").arg(name, editor_->modified() ? QStringLiteral("*") : QString()));
}

std::optional<Problem> MainWindow::open_scenario(const QString& path) {
  std::optional<Problem> p = editor_->load_file(path);
  if (p) {
    show_message(QStringLiteral("Could not open %1: %2. The current scenario is unchanged.")
                     .arg(path, QString::fromStdString(p->to_string())),
                 true);
    return p;
  }
  update_title();
  if (editor_->problems().empty()) {
    show_message(QStringLiteral("Opened %1.").arg(path), false);
  } else {
    show_message(QStringLiteral("Opened %1 with %2 problem(s); see the Scenario view.")
                     .arg(path)
                     .arg(editor_->problems().size()),
                 true);
    tabs_->setCurrentWidget(editor_);
  }
  update_actions();
  return std::nullopt;
}

bool MainWindow::confirm_discard() {
  if (!editor_->modified()) return true;
  const auto answer = QMessageBox::question(this, QStringLiteral("Unsaved changes"),
                                            QStringLiteral("The scenario has unsaved changes. Discard them?"),
                                            QMessageBox::Save | QMessageBox::Discard | QMessageBox::Cancel);
  if (answer == QMessageBox::Save) return save();
  return answer == QMessageBox::Discard;
}

void MainWindow::open_dialog() {
  if (!confirm_discard()) return;
  const QString path = QFileDialog::getOpenFileName(this, QStringLiteral("Open scenario"), QString(),
                                                    QStringLiteral("Scenarios (*.json);;All files (*)"));
  if (!path.isEmpty()) open_scenario(path);
}

bool MainWindow::save() {
  if (editor_->path().isEmpty()) return save_as_dialog();
  if (std::optional<Problem> p = editor_->save_file(editor_->path())) {
    show_message(QStringLiteral("Could not save: %1. Your edits are still here.").arg(QString::fromStdString(p->to_string())), true);
    return false;
  }
  show_message(editor_->problems().empty()
                   ? QStringLiteral("Saved %1.").arg(editor_->path())
                   : QStringLiteral("Saved %1; it still has %2 problem(s).").arg(editor_->path()).arg(editor_->problems().size()),
               !editor_->problems().empty());
  update_title();
  return true;
}

bool MainWindow::save_as_dialog() {
  const QString path = QFileDialog::getSaveFileName(this, QStringLiteral("Save scenario"), editor_->path(),
                                                    QStringLiteral("Scenarios (*.json)"));
  if (path.isEmpty()) return false;
  if (std::optional<Problem> p = editor_->save_file(path)) {
    show_message(QStringLiteral("Could not save: %1. Your edits are still here.").arg(QString::fromStdString(p->to_string())), true);
    return false;
  }
  show_message(QStringLiteral("Saved %1.").arg(path), false);
  update_title();
  return true;
}

void MainWindow::closeEvent(QCloseEvent* e) {
  if (!confirm_discard()) {
    e->ignore();
    return;
  }
  if (job_) job_->control->cancel = true;
  e->accept();
}

// ---------------- long work ----------------

void MainWindow::start_job(const QString& what, std::function<std::function<void()>(JobControl&)> work) {
  job_ = std::make_unique<Job>();
  job_->what = what;
  std::shared_ptr<JobControl> control = job_->control;
  connect(&job_->watcher, &QFutureWatcher<std::function<void()>>::finished, this, &MainWindow::job_finished);
  job_->watcher.setFuture(QtConcurrent::run([control, work = std::move(work)]() { return work(*control); }));
  progress_->setRange(0, 0);
  progress_->show();
  cancel_->show();
  progress_timer_->start();
  statusBar()->showMessage(what + QStringLiteral("..."));
  update_actions();
}

void MainWindow::job_finished() {
  if (!job_) return;
  std::unique_ptr<Job> job = std::move(job_);
  progress_timer_->stop();
  progress_->hide();
  cancel_->hide();
  const std::function<void()> apply = job->watcher.result();
  update_actions();
  if (job->control->cancel) {
    show_message(job->what + QStringLiteral(" cancelled."), false);
    return;
  }
  apply();
  update_actions();
}

void MainWindow::cancel_work() {
  if (!job_) return;
  // The worker stops at its next check; the window is free at once and drops its result.
  job_->control->cancel = true;
  Job* detached = job_.release();
  disconnect(&detached->watcher, nullptr, this, nullptr);
  // Deleted exactly once, after the worker is done (never from inside the watcher's signal).
  if (detached->watcher.isFinished()) {
    QTimer::singleShot(0, this, [detached] { delete detached; });
  } else {
    connect(&detached->watcher, &QFutureWatcher<std::function<void()>>::finished, this,
            [this, detached] { QTimer::singleShot(0, this, [detached] { delete detached; }); },
            Qt::SingleShotConnection);
  }
  progress_timer_->stop();
  progress_->hide();
  cancel_->hide();
  show_message(detached->what + QStringLiteral(" cancelled."), false);
  update_actions();
  emit work_cancelled();
}

void MainWindow::wait_for_work() {
  while (job_) QCoreApplication::processEvents(QEventLoop::WaitForMoreEvents);
  QCoreApplication::processEvents();
}

bool MainWindow::start_search() {
  if (job_) {
    show_message(QStringLiteral("Work is already running: wait or cancel it first."), true);
    return false;
  }
  if (!editor_->scenario()) {
    show_message(QStringLiteral("The scenario has %1 problem(s); fix them in the Scenario view before searching.")
                     .arg(editor_->problems().size()),
                 true);
    tabs_->setCurrentWidget(editor_);
    return false;
  }
  const Scenario scenario = *editor_->scenario();
  start_job(QStringLiteral("Searching plans"), [this, scenario](JobControl& control) -> std::function<void()> {
    Expected<SearchOutcome> out = search_plans(scenario, control);
    return [this, scenario, out = std::move(out)]() mutable {
      if (!out.ok()) {
        QString text;
        for (const Problem& p : out.problems()) text += QString::fromStdString(p.to_string()) + QLatin1Char('\n');
        show_message(QStringLiteral("Search failed:\n") + text.trimmed(), true);
        return;
      }
      searched_scenario_ = scenario;
      baseline_ = out->baseline;
      simulated_.clear();
      whatif_result_.reset();
      selected_plan_ = -1;
      selected_result_.reset();
      const size_t n = out->ranked.size();
      const size_t nr = out->rejected.size();
      const double capacity_gib = n > 0 ? out->ranked.front().memory.capacity_gib
                                        : (out->baseline ? out->baseline->memory.capacity_gib : 0.0);
      const size_t shown = out->estimated.size();
      plan_space_->set_points(std::move(out->estimated), capacity_gib,
                              static_cast<int64_t>(shown) < out->estimated_total
                                  ? QStringLiteral("An even sample of %1 of the %2 estimated plans is drawn.").arg(shown).arg(out->estimated_total)
                                  : QString());
      plans_->set_search(std::move(out->ranked), std::move(out->rejected));
      plans_->set_scenario(scenario);
      timeline_->clear(QStringLiteral("No timeline yet: select a plan and press \"Simulate selected plan with SimGrid\"."));
      show_message(QStringLiteral("Search done: %1 plan(s) ranked, %2 rejected (%3).")
                       .arg(n)
                       .arg(nr)
                       .arg(QString::fromStdString(out->note)),
                   n == 0);
      if (n > 0) {
        plans_->select_row(0);
        select_plan(0);
      }
      tabs_->setCurrentWidget(plans_);
    };
  });
  return true;
}

bool MainWindow::start_simulation() {
  if (job_) {
    show_message(QStringLiteral("Work is already running: wait or cancel it first."), true);
    return false;
  }
  if (!simgrid_built()) {
    show_message(QStringLiteral("This build has no SimGrid backend (configure with MONARCH_WITH_SIMGRID=ON)."), true);
    return false;
  }
  if (!searched_scenario_ || !selected_result_) {
    show_message(QStringLiteral("Run a search and select a plan first."), true);
    return false;
  }
  const Scenario scenario = *searched_scenario_;
  const Plan plan = selected_result_->plan;
  start_job(QStringLiteral("Simulating with SimGrid"), [this, scenario, plan](JobControl& control) -> std::function<void()> {
    Expected<BackendResult> out = simulate_simgrid(scenario, plan, control);
    return [this, out = std::move(out)]() mutable {
      if (!out.ok()) {
        QString text;
        for (const Problem& p : out.problems()) text += QString::fromStdString(p.to_string()) + QLatin1Char('\n');
        show_message(QStringLiteral("Simulation failed:\n") + text.trimmed(), true);
        return;
      }
      simulated_.push_back(out.value());
      const BackendResult& r = simulated_.back();
      const QString title = QStringLiteral("%1 %2").arg(QString::fromStdString(r.backend), plan_summary(r.plan));
      const BackendResult* measured = measured_run_of(r.plan);
      timeline_->show_result(r, title, measured, measured ? measured_lookup_->label : QString());
      memory_->show_memory_timeline(r, title);
      show_message(QStringLiteral("Simulated %1: iteration %2.").arg(title, format_seconds(r.iteration_time_s)), false);
      tabs_->setCurrentWidget(timeline_);
    };
  });
  return true;
}

// ---------------- selection and views ----------------

void MainWindow::select_plan(int row) {
  if (row < 0 || row >= plans_->model()->rowCount()) return;
  selected_plan_ = row;
  const BackendResult& r = plans_->model()->result(row);
  show_selected(r, QStringLiteral("#%1 %2 %3").arg(row + 1).arg(QString::fromStdString(r.backend), plan_summary(r.plan)));
}

void MainWindow::select_plan_value(const Plan& plan) {
  for (int row = 0; row < plans_->model()->rowCount(); ++row) {
    if (!same_plan_degrees(plans_->model()->result(row).plan, plan)) continue;
    plans_->select_row(row);  // the table's selection signal selects it everywhere
    if (selected_plan_ != row) select_plan(row);
    return;
  }
  if (!searched_scenario_) return;
  Expected<BackendResult> r = estimate(*searched_scenario_, plan);
  if (!r.ok()) {
    show_message(QStringLiteral("Cannot estimate %1: %2").arg(plan_summary(plan), QString::fromStdString(r.problems().front().to_string())), true);
    return;
  }
  selected_plan_ = -1;
  plans_->table()->clearSelection();
  show_selected(*r, QStringLiteral("%1 %2 (not in the ranked list)").arg(QString::fromStdString(r->backend), plan_summary(r->plan)));
}

const BackendResult* MainWindow::measured_run_of(const Plan& plan) {
  if (store_path_.isEmpty()) return nullptr;
  if (!measured_lookup_ || !(measured_lookup_->plan == plan) || measured_lookup_->store != store_path_) {
    measured_lookup_ = MeasuredLookup{plan, store_path_, std::nullopt, {}};
    Expected<std::vector<StoredRunLabel>> stored = list_store_runs(store_path_.toStdString());
    if (stored.ok()) {
      for (const StoredRunLabel& s : *stored) {  // newest first
        if (!s.measured || !same_plan_degrees(s.plan, plan)) continue;
        Expected<BackendResult> run = load_store_run(store_path_.toStdString(), s.id);
        if (!run.ok() || run->timeline.empty()) continue;
        measured_lookup_->run = std::move(run.value());
        measured_lookup_->label = QStringLiteral("store %1").arg(QString::fromStdString(s.label));
        break;
      }
    }
  }
  return measured_lookup_->run ? &*measured_lookup_->run : nullptr;
}

void MainWindow::show_selected(const BackendResult& r, const QString& title) {
  selected_result_ = r;
  memory_->show_result(r, title);
  communication_->show_result(r, title);
  plan_space_->set_selected(r.plan);
  if (searched_scenario_) {
    whatif_->set_baseline(*searched_scenario_, r);
    reliability_->show_plan(*searched_scenario_, r.plan, r.iteration_time_s, title);
  }
  bool shown = false;
  for (auto it = simulated_.rbegin(); it != simulated_.rend(); ++it) {
    if (it->plan == r.plan) {
      const QString sim_title = QStringLiteral("%1 %2").arg(QString::fromStdString(it->backend), plan_summary(it->plan));
      const BackendResult* measured = measured_run_of(it->plan);
      timeline_->show_result(*it, sim_title, measured, measured ? measured_lookup_->label : QString());
      memory_->show_memory_timeline(*it, sim_title);
      shown = true;
      break;
    }
  }
  if (!shown && !r.timeline.empty()) {
    timeline_->show_result(r, title);
    shown = true;
  }
  if (!shown) memory_->clear_memory_timeline(QStringLiteral("No memory timeline for this plan yet: simulate it with SimGrid."));
  if (!shown)
    timeline_->clear(simgrid_built() ? QStringLiteral("No timeline for %1 yet: press \"Simulate selected plan with SimGrid\".").arg(title)
                                     : QStringLiteral("No timeline: this build has no SimGrid backend."));
  update_actions();
}

void MainWindow::refresh_compare_runs() {
  std::vector<RunChoice> runs;
  for (int i = 0; i < plans_->model()->rowCount(); ++i) {
    const BackendResult& r = plans_->model()->result(i);
    runs.push_back({QStringLiteral("plan #%1 %2 %3").arg(i + 1).arg(QString::fromStdString(r.backend), plan_summary(r.plan)), r});
  }
  for (const BackendResult& r : simulated_)
    runs.push_back({QStringLiteral("%1 %2").arg(QString::fromStdString(r.backend), plan_summary(r.plan)), r});
  if (baseline_)
    runs.push_back({QStringLiteral("FSDP baseline %1 %2").arg(QString::fromStdString(baseline_->backend), plan_summary(baseline_->plan)), *baseline_});
  if (whatif_result_)
    runs.push_back({QStringLiteral("what-if %1").arg(plan_summary(whatif_result_->plan)), *whatif_result_});
  // A measured run of the selected plan in the store: compared with its prediction (SimGrid's
  // when simulated, else the analytical one) once per selection.
  QString predicted_label, measured_label;
  if (selected_result_) {
    for (const RunChoice& c : runs)
      if (c.result && c.result->plan == selected_result_->plan && !c.result->measured &&
          (predicted_label.isEmpty() || c.result->backend == "simgrid"))
        predicted_label = c.label;
  }
  if (!store_path_.isEmpty()) {
    Expected<std::vector<StoredRunLabel>> stored = list_store_runs(store_path_.toStdString());
    if (!stored.ok()) {
      show_message(QStringLiteral("Cannot read the results store %1: %2")
                       .arg(store_path_, QString::fromStdString(stored.problems().front().to_string())),
                   true);
    } else {
      for (const StoredRunLabel& s : *stored) {
        const QString label = QStringLiteral("store %1").arg(QString::fromStdString(s.label));
        if (s.measured && measured_label.isEmpty() && selected_result_ && same_plan_degrees(s.plan, selected_result_->plan))
          measured_label = label;
        runs.push_back({label, std::nullopt, s.id});
      }
    }
  }
  compare_->set_runs(std::move(runs));
  if (selected_result_ && !predicted_label.isEmpty() && !measured_label.isEmpty() &&
      !(compare_paired_plan_ && *compare_paired_plan_ == selected_result_->plan)) {
    compare_paired_plan_ = selected_result_->plan;
    compare_->choose(compare_->find_run(predicted_label), compare_->find_run(measured_label));
  }
}

bool MainWindow::show_view(const QString& name) {
  const int i = view_names().indexOf(name);
  if (i < 0) return false;
  tabs_->setCurrentIndex(i);
  return true;
}

QWidget* MainWindow::view(const QString& name) const {
  const int i = view_names().indexOf(name);
  return i < 0 ? nullptr : tabs_->widget(i);
}

Problems MainWindow::save_screenshots(const QString& dir, int width_px) {
  Problems problems;
  if (!QDir().mkpath(dir)) return {Problem{dir.toStdString(), "cannot create the folder"}};
  const int keep = tabs_->currentIndex();
  for (int i = 0; i < view_names().size(); ++i) {
    tabs_->setCurrentIndex(i);
    QCoreApplication::processEvents();
    QPixmap shot = tabs_->widget(i)->grab();
    if (width_px > 0 && shot.width() > width_px) shot = shot.scaledToWidth(width_px, Qt::SmoothTransformation);
    const QString path = QDir(dir).filePath(view_names()[i] + QStringLiteral(".png"));
    if (!shot.save(path, "PNG")) problems.push_back(Problem{path.toStdString(), "cannot write the PNG"});
  }
  tabs_->setCurrentIndex(keep);
  return problems;
}

}  // namespace monarch::gui
