// monarch-gui [SCENARIO.json]
// monarch-gui --screenshot DIR SCENARIO.json   one PNG per view, then exit
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <cstdio>

#include "gui/app/backends.h"
#include "gui/app/main_window.h"
#include "gui/app/result_views.h"
#include "gui/app/scenario_editor.h"
#include "gui/app/whatif_view.h"

namespace {

constexpr int kExitBadInput = 2;  // as monarch-sim: the scenario or an option is invalid
constexpr int kExitFailed = 1;

void print_problems(const monarch::Problems& problems) {
  for (const monarch::Problem& p : problems) std::fprintf(stderr, "monarch-gui: %s\n", p.to_string().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName(QStringLiteral("monarch-gui"));
  QApplication::setOrganizationName(QStringLiteral("monarch-sim"));

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("Explore training plans: search, timeline, memory, communication, compare, what-if."));
  parser.addHelpOption();
  QCommandLineOption screenshot(QStringLiteral("screenshot"),
                                QStringLiteral("Open SCENARIO.json, search, simulate the best plan (when SimGrid is built), "
                                               "write one PNG per view into DIR and exit."),
                                QStringLiteral("DIR"));
  parser.addOption(screenshot);
  QCommandLineOption db(QStringLiteral("db"),
                        QStringLiteral("Results store whose runs the Compare view offers (default: results/monarch.db when it exists)."),
                        QStringLiteral("FILE"));
  parser.addOption(db);
  QCommandLineOption width(QStringLiteral("screenshot-width"),
                           QStringLiteral("With --screenshot: scale the PNGs down to PX pixels wide (docs/img uses 1000)."),
                           QStringLiteral("PX"));
  parser.addOption(width);
  parser.addPositionalArgument(QStringLiteral("scenario"), QStringLiteral("Scenario file to open"), QStringLiteral("[SCENARIO.json]"));
  parser.process(app);
  const QStringList args = parser.positionalArguments();
  if (args.size() > 1) {
    std::fprintf(stderr, "monarch-gui: expected at most one scenario file, found %lld arguments\n",
                 static_cast<long long>(args.size()));
    return kExitBadInput;
  }

  monarch::gui::MainWindow window;
  if (parser.isSet(db)) window.set_store_path(parser.value(db));
  if (parser.isSet(screenshot)) {
    if (args.size() != 1) {
      std::fprintf(stderr, "monarch-gui: --screenshot DIR needs a scenario file: monarch-gui --screenshot DIR SCENARIO.json\n");
      return kExitBadInput;
    }
    if (auto p = window.open_scenario(args.front())) {
      print_problems({*p});
      return kExitBadInput;
    }
    if (!window.editor()->scenario()) {
      print_problems(window.editor()->problems());
      return kExitBadInput;
    }
    window.show();
    if (!window.start_search()) {
      std::fprintf(stderr, "monarch-gui: %s\n", window.message().toStdString().c_str());
      return kExitFailed;
    }
    window.wait_for_work();
    if (window.plans()->model()->rowCount() == 0) {
      std::fprintf(stderr, "monarch-gui: %s\n", window.message().toStdString().c_str());
      return kExitFailed;
    }
    if (monarch::gui::simgrid_built() && window.start_simulation()) window.wait_for_work();
    // The what-if curves with the best plan at each value (a search per value, on a worker).
    if (window.whatif()->start_sweep(/*best=*/true, /*simgrid=*/false)) window.whatif()->wait_for_sweep();
    int width_px = 0;
    if (parser.isSet(width)) {
      bool ok = false;
      width_px = parser.value(width).toInt(&ok);
      if (!ok || width_px < 100 || width_px > 10000) {
        std::fprintf(stderr, "monarch-gui: --screenshot-width: expected a width in pixels from 100 to 10000, found '%s'\n",
                     parser.value(width).toStdString().c_str());
        return kExitBadInput;
      }
    }
    const monarch::Problems problems = window.save_screenshots(parser.value(screenshot), width_px);
    if (!problems.empty()) {
      print_problems(problems);
      return kExitFailed;
    }
    for (const QString& name : monarch::gui::MainWindow::view_names())
      std::printf("%s\n", QDir(parser.value(screenshot)).filePath(name + QStringLiteral(".png")).toStdString().c_str());
    return 0;
  }
  if (!args.isEmpty()) window.open_scenario(args.front());
  window.show();
  return app.exec();
}
