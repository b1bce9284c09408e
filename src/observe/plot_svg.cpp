// Hand-written SVG loss plot (see plot_svg.h): linear x (step), linear or log y, 1-2-5 ticks.
#include "observe/plot_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "observe/metrics.h"

namespace tessera {

namespace fs = std::filesystem;

namespace {

// Tableau 10: distinct, colour-blind friendly.
const char* const kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fmt(double v, const char* f = "%.2f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Tick label: short, without trailing zeros ("0.5", "1200", "2e+04").
std::string tick_label(double v) {
  if (v == 0) return "0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

double nice_step(double range, int target) {
  double raw = range / std::max(1, target);
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double r = raw / mag;
  double nice = r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10;
  return nice * mag;
}

std::vector<double> linear_ticks(double lo, double hi, int target) {
  std::vector<double> t;
  double step = nice_step(hi - lo, target);
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  return t;
}

// 1, 2, 5 x 10^k within [lo, hi]; only decades when the range spans many of them.
std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> t;
  const bool many = std::log10(hi / lo) > 3;
  for (int e = static_cast<int>(std::floor(std::log10(lo))); e <= static_cast<int>(std::ceil(std::log10(hi))); ++e)
    for (double m : {1.0, 2.0, 5.0}) {
      if (many && m != 1.0) continue;
      double v = m * std::pow(10.0, e);
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) t.push_back(v);
    }
  if (t.size() >= 4) return t;
  // Less than a decade or so: evenly spaced nice values read better than two lonely marks.
  std::vector<double> lin;
  for (double v : linear_ticks(lo, hi, 6))
    if (v > 0) lin.push_back(v);
  return lin.size() > t.size() ? lin : t;
}

std::vector<double> smoothed(const std::vector<double>& v, double alpha) {
  if (alpha <= 0) return v;
  std::vector<double> out(v.size());
  double acc = 0, weight = 0;  // bias-corrected EMA, so the first points are not pulled to 0
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) { out[i] = v[i]; continue; }
    acc = alpha * acc + (1 - alpha) * v[i];
    weight = alpha * weight + (1 - alpha);
    out[i] = acc / weight;
  }
  return out;
}

}  // namespace

std::string run_display_name(const std::string& run_dir_or_file) {
  fs::path p(run_dir_or_file);
  if (!p.has_filename()) p = p.parent_path();  // trailing slash
  std::error_code ec;
  if (fs::is_directory(p, ec) || p.extension() != ".jsonl") return p.filename().string();
  fs::path parent = p.parent_path();
  if (p.filename() == "metrics.jsonl" && !parent.empty() && parent.filename() != "." && parent.filename() != "..")
    return parent.filename().string();
  return p.stem().string();
}

Result<std::string> render_loss_svg(const std::vector<PlotSeries>& series_in, const PlotOptions& opt) {
  if (series_in.empty()) return invalid_argument("plot: no runs given");
  if (opt.width < 200 || opt.height < 150) return invalid_argument("plot: width/height must be at least 200x150 pixels");
  if (!(opt.smooth >= 0 && opt.smooth < 1)) return invalid_argument("plot: smooth must be in [0, 1)");
  std::vector<PlotSeries> series = series_in;
  for (auto& s : series) s.loss = smoothed(s.loss, opt.smooth);

  auto usable = [&](double v) { return std::isfinite(v) && (!opt.log_y || v > 0); };
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  for (const auto& s : series) {
    if (s.step.size() != s.loss.size() || s.eval_step.size() != s.val_loss.size())
      return invalid_argument("plot: series '" + s.name + "' has steps and values of different lengths");
    size_t points = 0;
    auto add = [&](int64_t x, double y) {
      if (!usable(y)) return;
      x_lo = std::min(x_lo, double(x)), x_hi = std::max(x_hi, double(x));
      y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
      ++points;
    };
    for (size_t i = 0; i < s.step.size(); ++i) add(s.step[i], s.loss[i]);
    if (opt.show_val)
      for (size_t i = 0; i < s.eval_step.size(); ++i) add(s.eval_step[i], s.val_loss[i]);
    if (points == 0)
      return invalid_argument("plot: run '" + s.name + "' has no " + (opt.log_y ? "positive " : "finite ") +
                              "loss values to draw (did training log any step?)");
  }
  if (x_hi == x_lo) x_lo -= 1, x_hi += 1;
  if (opt.log_y) {
    const double pad = y_hi / y_lo < 1.01 ? 1.1 : std::pow(y_hi / y_lo, 0.04);  // ~4% of the height
    y_lo /= pad, y_hi *= pad;
  } else {
    double pad = y_hi > y_lo ? 0.05 * (y_hi - y_lo) : std::max(0.5, 0.1 * std::abs(y_hi));
    y_lo -= pad, y_hi += pad;
  }

  const double W = opt.width, H = opt.height, left = 72, right = 20, top = 44, bottom = 56;
  const double pw = W - left - right, ph = H - top - bottom;
  auto px = [&](double x) { return left + (x - x_lo) / (x_hi - x_lo) * pw; };
  auto py = [&](double y) {
    double f = opt.log_y ? (std::log(y) - std::log(y_lo)) / (std::log(y_hi) - std::log(y_lo)) : (y - y_lo) / (y_hi - y_lo);
    return top + (1 - f) * ph;
  };

  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << opt.width << "\" height=\"" << opt.height
    << "\" viewBox=\"0 0 " << opt.width << " " << opt.height << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << fmt(W / 2) << "\" y=\"26\" text-anchor=\"middle\" font-size=\"16\">" << xml_escape(opt.title)
    << "</text>\n";

  // Grid, ticks and labels.
  o << "<g stroke=\"#e5e5e5\" stroke-width=\"1\">\n";
  const auto xt = linear_ticks(x_lo, x_hi, 8);
  const auto yt = opt.log_y ? log_ticks(y_lo, y_hi) : linear_ticks(y_lo, y_hi, 6);
  for (double v : xt) o << "<line x1=\"" << fmt(px(v)) << "\" y1=\"" << top << "\" x2=\"" << fmt(px(v)) << "\" y2=\"" << top + ph << "\"/>\n";
  for (double v : yt) o << "<line x1=\"" << left << "\" y1=\"" << fmt(py(v)) << "\" x2=\"" << left + pw << "\" y2=\"" << fmt(py(v)) << "\"/>\n";
  o << "</g>\n<g fill=\"#333\">\n";
  for (double v : xt)
    o << "<text x=\"" << fmt(px(v)) << "\" y=\"" << fmt(top + ph + 18) << "\" text-anchor=\"middle\">" << tick_label(v) << "</text>\n";
  for (double v : yt)
    o << "<text x=\"" << left - 8 << "\" y=\"" << fmt(py(v) + 4) << "\" text-anchor=\"end\">" << tick_label(v) << "</text>\n";
  o << "<text x=\"" << fmt(left + pw / 2) << "\" y=\"" << fmt(H - 14) << "\" text-anchor=\"middle\">step</text>\n"
    << "<text transform=\"translate(18," << fmt(top + ph / 2) << ") rotate(-90)\" text-anchor=\"middle\">loss"
    << (opt.log_y ? " (log scale)" : "") << "</text>\n</g>\n"
    << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << fmt(pw) << "\" height=\"" << fmt(ph)
    << "\" fill=\"none\" stroke=\"#333\" stroke-width=\"1\"/>\n";

  // Curves: one polyline per unbroken stretch of a run's train loss; circles for val loss.
  for (size_t r = 0; r < series.size(); ++r) {
    const auto& s = series[r];
    const char* colour = kPalette[r % std::size(kPalette)];
    o << "<g id=\"run-" << r << "\" stroke=\"" << colour << "\" fill=\"" << colour << "\">\n";
    std::string pts;
    auto flush = [&] {
      if (!pts.empty())
        o << "<polyline fill=\"none\" stroke-width=\"1.6\" stroke-linejoin=\"round\" points=\"" << pts << "\"/>\n";
      pts.clear();
    };
    for (size_t i = 0; i < s.step.size(); ++i) {
      if (!usable(s.loss[i])) { flush(); continue; }
      if (!pts.empty()) pts += ' ';
      pts += fmt(px(double(s.step[i])));
      pts += ',';
      pts += fmt(py(s.loss[i]));
    }
    flush();
    if (opt.show_val)
      for (size_t i = 0; i < s.eval_step.size(); ++i)
        if (usable(s.val_loss[i]))
          o << "<circle cx=\"" << fmt(px(double(s.eval_step[i]))) << "\" cy=\"" << fmt(py(s.val_loss[i]))
            << "\" r=\"3.5\" fill=\"white\" stroke-width=\"1.6\"/>\n";
    o << "</g>\n";
  }

  // Legend, top right inside the plot area.
  bool any_val = false;
  size_t longest = 0;
  for (const auto& s : series) {
    any_val |= opt.show_val && !s.eval_step.empty();
    longest = std::max(longest, s.name.size());
  }
  const size_t rows = series.size() + (any_val ? 1 : 0);
  const double lw = 44 + 7.0 * std::max<size_t>(longest, 14), lh = 8 + 18.0 * rows;
  const double lx = left + pw - lw - 8, ly = top + 8;
  o << "<g class=\"legend\">\n<rect x=\"" << fmt(lx) << "\" y=\"" << fmt(ly) << "\" width=\"" << fmt(lw)
    << "\" height=\"" << fmt(lh) << "\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#bbb\"/>\n";
  for (size_t r = 0; r < series.size(); ++r) {
    const char* colour = kPalette[r % std::size(kPalette)];
    double y = ly + 16 + 18.0 * r;
    o << "<line x1=\"" << fmt(lx + 8) << "\" y1=\"" << fmt(y - 4) << "\" x2=\"" << fmt(lx + 32) << "\" y2=\""
      << fmt(y - 4) << "\" stroke=\"" << colour << "\" stroke-width=\"2.5\"/>\n"
      << "<text x=\"" << fmt(lx + 38) << "\" y=\"" << fmt(y) << "\" fill=\"#333\">" << xml_escape(series[r].name)
      << "</text>\n";
  }
  if (any_val) {
    double y = ly + 16 + 18.0 * series.size();
    o << "<circle cx=\"" << fmt(lx + 20) << "\" cy=\"" << fmt(y - 4) << "\" r=\"3.5\" fill=\"white\" stroke=\"#555\" "
      << "stroke-width=\"1.6\"/>\n<text x=\"" << fmt(lx + 38) << "\" y=\"" << fmt(y) << "\" fill=\"#333\">val loss</text>\n";
  }
  o << "</g>\n</svg>\n";
  return o.str();
}

Status plot_runs_svg(const std::string& output_svg, const std::vector<std::string>& runs, const PlotOptions& opt) {
  const std::string ext = fs::path(output_svg).extension().string();
  if (ext != ".svg")
    return invalid_argument("plot output '" + output_svg + "': only SVG output is supported (name it *.svg" +
                            (ext == ".png" ? "; convert afterwards, e.g. rsvg-convert in.svg -o out.png)" : ")"));
  if (runs.empty()) return invalid_argument("plot: no runs given (pass run directories or metrics.jsonl files)");
  if (!opt.names.empty() && opt.names.size() != runs.size())
    return invalid_argument("plot: " + std::to_string(opt.names.size()) + " names given for " +
                            std::to_string(runs.size()) + " runs");
  std::vector<PlotSeries> series;
  for (size_t i = 0; i < runs.size(); ++i) {
    TS_ASSIGN_OR_RETURN(MetricsSeries m, read_metrics(runs[i]));
    PlotSeries s;
    s.name = opt.names.empty() ? run_display_name(runs[i]) : opt.names[i];
    s.step = std::move(m.step);
    s.loss = std::move(m.loss);
    s.eval_step = std::move(m.eval_step);
    s.val_loss = std::move(m.val_loss);
    if (s.step.empty() && s.eval_step.empty())
      return invalid_argument("plot: " + metrics_path(runs[i]) + " holds no loss events (did the run log a step?)");
    series.push_back(std::move(s));
  }
  TS_ASSIGN_OR_RETURN(std::string svg, render_loss_svg(series, opt));
  std::ofstream f(output_svg, std::ios::binary | std::ios::trunc);
  if (!f) return io_error("cannot create '" + output_svg + "': check that its directory exists and is writable");
  f << svg;
  f.close();
  if (!f) return io_error("error writing '" + output_svg + "'");
  return Status::ok_status();
}

}  // namespace tessera
