// `pronghorn export RUN_DIR|CHECKPOINT --out DIR`: a run's policy (its best,
// else newest checkpoint, as `pronghorn eval` picks it) as files any program
// reads without Pronghorn: safetensors weights, a JSON description, an ONNX
// model, and a NumPy loader (export/policy_export.h, docs/export.md).
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "export/policy_export.h"
#include "tools/cli.h"
#include "tools/run_policy.h"

namespace pronghorn::cli {
namespace {

struct ExportArgs {
  std::string path;  // a run directory or a .ckpt file
  std::string out;
};

void run_export(const ExportArgs& args) {
  RunPolicy run = load_run_policy(args.path, "export");
  const exporting::PolicySource source{
      .run_name = run.config.run.name,
      .checkpoint = std::filesystem::path(run.checkpoint).filename().string(),
      .env_steps = run.ckpt.counters.env_steps,
      .learner_steps = run.ckpt.counters.learner_steps,
      .pronghorn_version = PRONGHORN_VERSION,
  };
  const std::vector<std::string> files =
      exporting::export_policy(*run.model, run.spec, source, args.out);
  std::cout << fmt::format("export {} (env {}, {} env steps):\n", run.checkpoint, run.spec.name,
                           source.env_steps);
  for (const std::string& file : files) std::cout << "  " << file << "\n";
  std::cout << fmt::format(
      "In Python (NumPy alone):\n"
      "  import sys; sys.path.insert(0, \"{0}\")\n"
      "  import pronghorn_policy\n"
      "  policy = pronghorn_policy.load(\"{0}\")\n"
      "  action, state = policy.predict(obs)\n",
      args.out);
}

}  // namespace

Command add_export_command(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* command = app.add_subcommand(
      "export",
      "A run's policy as safetensors weights, a JSON description, ONNX and a NumPy loader");
  command
      ->add_option("path", args->path,
                   "a run directory (its checkpoints/best.ckpt, else its newest checkpoint) or a "
                   ".ckpt file")
      ->required();
  command->add_option("--out", args->out, "the folder to write (created if missing)")->required();
  return {command, [args] { run_export(*args); }};
}

}  // namespace pronghorn::cli
