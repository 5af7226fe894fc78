#include "gui/models/format.h"

#include <cmath>

namespace monarch::gui {

QString format_seconds(double s) {
  const double a = std::fabs(s);
  if (a == 0) return QStringLiteral("0 s");
  if (a >= 1) return QString::number(s, 'g', 4) + QStringLiteral(" s");
  if (a >= 1e-3) return QString::number(s * 1e3, 'g', 4) + QStringLiteral(" ms");
  if (a >= 1e-6) return QString::number(s * 1e6, 'g', 4) + QStringLiteral(" us");
  return QString::number(s * 1e9, 'g', 4) + QStringLiteral(" ns");
}

QString format_bytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = bytes;
  int u = 0;
  while (std::fabs(v) >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  if (u == 0) return QString::number(static_cast<qint64>(v)) + QStringLiteral(" B");
  return QString::number(v, 'f', std::fabs(v) >= 100 ? 0 : (std::fabs(v) >= 10 ? 1 : 2)) +
         QLatin1Char(' ') + QLatin1String(kUnits[u]);
}

QString plan_summary(const Plan& p) { return QString::fromStdString(describe(p, PlanDetail::kFull)); }

int64_t group_size(const Plan& p, std::string_view g) {
  if (g == "tp") return p.tp;
  if (g == "cp") return p.cp;
  if (g == "ep") return p.ep;
  if (g == "dp") return p.dp;
  if (g == "pp") return p.pp > 1 ? 2 : 1;
  if (g == "world") return p.world_size();
  if (g == "dp-cp") return p.dp * p.cp;
  // Tied word embeddings: the first and the last pipeline stage.
  if (g == "embedding") return p.pp > 1 ? 2 : 1;
  // Expert tensor parallel: etp ranks (tp when not set).
  if (g == "etp") return p.expert_tp();
  // Expert data parallel (Megatron-core expert layout): tp*cp*dp / (etp*ep) ranks.
  if (g == "edp" || g == "expert-dp" || g == "expert_dp") {
    const int64_t n = p.tp * p.cp * p.dp / (p.expert_tp() * (p.ep > 0 ? p.ep : 1));
    return n > 0 ? n : 1;
  }
  return 0;
}

}  // namespace monarch::gui
