// tessera plot --out loss.svg RUN [RUN ...]: loss curves of runs as an SVG.
#include <cstdio>

#include "cli/commands.h"
#include "observe/plot_svg.h"

namespace tessera::cli {

Runner add_plot(CLI::App& app) {
  struct Args {
    std::vector<std::string> runs;
    std::string out = "loss.svg";
    bool log_y = false;
    double smooth = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* c = app.add_subcommand("plot", "Draw the loss curves of one or more runs into an SVG file");
  c->add_option("runs", a->runs, "Run directories (holding metrics.jsonl) or metrics files")->required();
  c->add_option("--out", a->out, "Output .svg file")->capture_default_str();
  c->add_flag("--log-y", a->log_y, "Logarithmic loss axis");
  c->add_option("--smooth", a->smooth, "EMA smoothing factor in [0,1)");
  return [a] {
    PlotOptions o;
    o.log_y = a->log_y;
    o.smooth = a->smooth;
    Status s = plot_runs_svg(a->out, a->runs, o);
    if (!s.ok()) return fail(s);
    std::printf("wrote %s\n", a->out.c_str());
    return 0;
  };
}

}  // namespace tessera::cli
