// Metrics JSON lines round trip (including resume truncation and torn last lines) and the SVG plot.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "observe/metrics.h"
#include "observe/plot_svg.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::path(TESSERA_BINARY_DIR) / "test_tmp" / "train_config" / name;
  fs::remove_all(d);
  return d;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

void write_run(const fs::path& dir, int steps, double start_loss, int eval_every) {
  auto w = MetricsWriter::open(dir.string(), /*append=*/false);
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  for (int s = 0; s < steps; ++s) {
    TrainEvent e;
    e.step = s;
    e.loss = start_loss / (1 + 0.1 * s);
    e.lr = 1e-3;
    ASSERT_TRUE(w->log_train(e).ok());
    if (eval_every > 0 && s % eval_every == 0) {
      ASSERT_TRUE(w->log_eval(s, e.loss * 1.1).ok());
    }
  }
}

TEST(Metrics, RoundTrip) {
  fs::path dir = fresh_dir("roundtrip") / "nested";
  auto w = MetricsWriter::open(dir.string());
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w->path(), (dir / "metrics.jsonl").string());
  TrainEvent e;
  e.step = 1, e.loss = 5.5, e.lr = 1e-4, e.grad_norm = 2.25, e.tokens_per_s = 12345.5, e.mfu = 0.42;
  e.mem_mb = 100.0, e.time_s = 0.5, e.extra = {{"rank", 0}};
  ASSERT_TRUE(w->log_train(e).ok());
  // Written and flushed before the writer is closed: a crash loses nothing logged.
  std::string text = slurp(dir / "metrics.jsonl");
  EXPECT_NE(text.find("\"rank\":0"), std::string::npos) << text;
  EXPECT_EQ(count(text, "\n"), 1u);
  e.step = 2;
  e.loss = std::nan("");  // a diverged step stays in the log as null
  ASSERT_TRUE(w->log_train(e).ok());
  ASSERT_TRUE(w->log_eval(2, 5.0).ok());

  auto m = read_metrics(dir.string());  // a directory works as well as the file
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_EQ(m->step, (std::vector<int64_t>{1, 2}));
  EXPECT_DOUBLE_EQ(m->loss[0], 5.5);
  EXPECT_TRUE(std::isnan(m->loss[1]));
  EXPECT_DOUBLE_EQ(m->lr[0], 1e-4);
  EXPECT_DOUBLE_EQ(m->grad_norm[0], 2.25);
  EXPECT_DOUBLE_EQ(m->tokens_per_s[0], 12345.5);
  EXPECT_DOUBLE_EQ(m->mfu[0], 0.42);
  EXPECT_DOUBLE_EQ(m->mem_mb[0], 100.0);
  EXPECT_DOUBLE_EQ(m->time_s[0], 0.5);
  ASSERT_EQ(m->eval_step, (std::vector<int64_t>{2}));
  EXPECT_DOUBLE_EQ(m->val_loss[0], 5.0);
}

TEST(Metrics, AppendAndResumeReplacesLaterSteps) {
  fs::path dir = fresh_dir("resume");
  write_run(dir, 6, 4.0, 2);  // steps 0..5, evals at 0, 2, 4
  {
    auto w = MetricsWriter::open(dir.string(), /*append=*/true);
    ASSERT_TRUE(w.ok());
    for (int s = 3; s < 5; ++s) {
      TrainEvent e;
      e.step = s;
      e.loss = 1.0;
      ASSERT_TRUE(w->log_train(e).ok());
    }
  }
  auto m = read_metrics((dir / "metrics.jsonl").string());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->step, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_DOUBLE_EQ(m->loss[3], 1.0);
  EXPECT_DOUBLE_EQ(m->loss[4], 1.0);
  EXPECT_EQ(m->eval_step, (std::vector<int64_t>{0, 2}));  // the stale eval at 4 is gone
}

TEST(Metrics, TornLastLineSkippedOtherBadLinesReported) {
  fs::path dir = fresh_dir("torn");
  write_run(dir, 3, 4.0, 0);
  { std::ofstream(dir / "metrics.jsonl", std::ios::app) << "{\"step\": 3, \"lo"; }
  auto m = read_metrics(dir.string());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->step.size(), 3u);

  { std::ofstream(dir / "metrics.jsonl", std::ios::app) << "\n{\"step\": 4, \"loss\": 1}\n"; }
  m = read_metrics(dir.string());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::corrupt_data);
  EXPECT_NE(m.status().message().find("metrics.jsonl:4:"), std::string::npos) << m.status().message();

  { std::ofstream(dir / "metrics.jsonl") << "{\"loss\": 1}\n"; }
  m = read_metrics(dir.string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("without an integer \"step\""), std::string::npos);
}

TEST(Metrics, MissingFileIsClearError) {
  auto m = read_metrics(fresh_dir("missing").string());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::not_found);
  EXPECT_NE(m.status().message().find("metrics.jsonl"), std::string::npos) << m.status().message();
}

TEST(PlotSvg, TwoRunsWithLegendAndValMarkers) {
  fs::path root = fresh_dir("plot");
  write_run(root / "baseline", 50, 5.0, 10);
  write_run(root / "wider & better", 40, 4.0, 0);
  fs::path out = root / "loss.svg";
  PlotOptions opt;
  opt.title = "KJV <byte>";
  Status st = plot_runs_svg(out.string(), {(root / "baseline").string(), (root / "wider & better" / "metrics.jsonl").string()}, opt);
  ASSERT_TRUE(st.ok()) << st.to_string();
  std::string svg = slurp(out);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(svg.find("</svg>\n"), std::string::npos);
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_NE(svg.find(">baseline</text>"), std::string::npos);
  EXPECT_NE(svg.find(">wider &amp; better</text>"), std::string::npos);  // names are XML-escaped
  EXPECT_NE(svg.find("KJV &lt;byte&gt;"), std::string::npos);
  EXPECT_NE(svg.find(">val loss</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "r=\"3.5\""), 5u + 1u);  // 5 evals + the legend marker
  EXPECT_NE(svg.find("#1f77b4"), std::string::npos);
  EXPECT_NE(svg.find("#ff7f0e"), std::string::npos);  // distinct colours
  EXPECT_EQ(count(svg, "<g"), count(svg, "</g>"));
  EXPECT_EQ(count(svg, "<text"), count(svg, "</text>"));
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(PlotSvg, GapsLogScaleAndErrors) {
  PlotSeries s;
  s.name = "r";
  s.step = {0, 1, 2, 3, 4};
  s.loss = {4, 3, std::nan(""), 2, 1.5};
  PlotOptions opt;
  opt.log_y = true;
  auto svg = render_loss_svg({s}, opt);
  ASSERT_TRUE(svg.ok()) << svg.status().to_string();
  EXPECT_EQ(count(svg.value(), "<polyline"), 2u);  // the NaN splits the curve
  EXPECT_NE(svg.value().find("(log scale)"), std::string::npos);

  PlotSeries empty;
  empty.name = "empty";
  auto bad = render_loss_svg({empty});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'empty'"), std::string::npos);

  fs::path root = fresh_dir("plot_errors");
  Status png = plot_runs_svg((root / "loss.png").string(), {root.string()});
  ASSERT_FALSE(png.ok());
  EXPECT_NE(png.message().find("only SVG"), std::string::npos) << png.message();
  Status missing = plot_runs_svg((root / "loss.svg").string(), {(root / "nope").string()});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.code(), StatusCode::not_found);
  EXPECT_NE(missing.message().find("nope/metrics.jsonl"), std::string::npos) << missing.message();
}

TEST(PlotSvg, RunDisplayName) {
  EXPECT_EQ(run_display_name("runs/kjv/"), "kjv");
  EXPECT_EQ(run_display_name("runs/kjv/metrics.jsonl"), "kjv");
  EXPECT_EQ(run_display_name("other.jsonl"), "other");
}

}  // namespace
}  // namespace tessera
