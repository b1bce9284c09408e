// Names of the model passes, as anomaly reports and fault specs spell them.
#include "model/numerics_probe.h"

namespace tessera {

std::string_view model_pass_name(ModelPass pass) { return pass == ModelPass::forward ? "forward" : "backward"; }

}  // namespace tessera
