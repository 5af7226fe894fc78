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

QString activations_text(const Plan& p) {
  QString text = QString::fromLatin1(to_string(p.recompute));
  if (p.activation_offload_layers > 0)
    text += QStringLiteral(", offload %1 layers").arg(p.activation_offload_layers);
  return text;
}

}  // namespace monarch::gui
