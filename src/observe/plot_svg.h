// Loss curves of one or more runs as a self-contained SVG (axes, ticks, grid, legend), written by hand.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera {

struct PlotOptions {
  std::string title = "Training loss";
  int width = 900;   // pixels
  int height = 540;
  bool log_y = false;
  bool show_val = true;            // val-loss markers (circles) in the run's colour
  double smooth = 0;               // EMA factor in [0, 1) applied to train loss; 0 = raw
  std::vector<std::string> names;  // legend names; empty = derived from the run directory names
};

// One curve to draw; plot_runs_svg fills these from metrics files.
struct PlotSeries {
  std::string name;
  std::vector<int64_t> step;
  std::vector<double> loss;  // NaN / non-positive (log scale) points leave a gap
  std::vector<int64_t> eval_step;
  std::vector<double> val_loss;
};

// Renders the SVG document; error when there is nothing to draw.
Result<std::string> render_loss_svg(const std::vector<PlotSeries>& series, const PlotOptions& opt = {});

// runs: run directories (holding metrics.jsonl) or metrics files. output must end in ".svg".
Status plot_runs_svg(const std::string& output_svg, const std::vector<std::string>& runs,
                     const PlotOptions& opt = {});

// Legend name of a run: its directory name ("runs/kjv/metrics.jsonl" and "runs/kjv/" -> "kjv").
std::string run_display_name(const std::string& run_dir_or_file);

}  // namespace tessera
