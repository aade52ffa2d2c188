#include "export/policy_export.h"

#include <filesystem>

#include "core/error.h"
#include "core/files.h"
#include "export/onnx_policy.h"
#include "export/python_loader_source.h"
#include "model/policy_face.h"

namespace pronghorn::exporting {

Safetensors policy_weights(PolicyNetImpl& model, const PolicySource& source) {
  std::vector<float> flat(static_cast<size_t>(model.parameter_count()));
  model.write_flat(flat.data());
  Safetensors out;
  for (const ParameterEntry& p : parameter_list(model))
    out.tensors.push_back(float_tensor(p.name, p.shape, flat.data() + p.offset));
  if (model.normalizes_observations()) {
    const std::vector<int64_t>& shape = model.spec().obs_shape;
    const at::Tensor mean = model.observation_mean().to(at::kCPU).contiguous();
    const at::Tensor var = model.observation_var().to(at::kCPU).contiguous();
    out.tensors.push_back(float_tensor(kObservationMeanTensor, shape, mean.data_ptr<float>()));
    out.tensors.push_back(float_tensor(kObservationVarTensor, shape, var.data_ptr<float>()));
  }
  out.metadata = {{"format", "pronghorn-policy"},
                  {"description", "policy.json"},
                  {"run", source.run_name},
                  {"checkpoint", source.checkpoint}};
  return out;
}

std::vector<std::string> export_policy(PolicyNetImpl& model, const EnvSpec& env,
                                       const PolicySource& source, const std::string& out_dir) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  PRONGHORN_CHECK(!ec, "export: cannot create ", out_dir, ": ", ec.message());
  const std::filesystem::path dir(out_dir);
  const Safetensors weights = policy_weights(model, source);
  const std::string description =
      policy_description(model.spec(), env, source, model.normalizes_observations());
  const std::vector<std::pair<std::string, std::string>> files = {
      {"model.safetensors", encode_safetensors(weights)},
      {"policy.json", description},
      {"policy.onnx",
       onnx_policy(model.spec(), env, weights, description, source.pronghorn_version)},
      {"pronghorn_policy.py", std::string(kPythonLoaderSource)},
  };
  std::vector<std::string> written;
  for (const auto& [name, bytes] : files) {
    written.push_back((dir / name).string());
    write_file_atomically(written.back(), bytes);
  }
  return written;
}

}  // namespace pronghorn::exporting
