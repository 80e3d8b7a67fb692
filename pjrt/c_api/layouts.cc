// The Layouts extension: every array the plugin holds is dense row-major, and saying so from C
// keeps jaxlib from deriving layouts out of the optimized program. Without the executable
// getters jaxlib 0.10.2 falls back to PjRtExecutable's defaults, which fetch the optimized
// program and convert it to HLO modules three times per compile (IFRT's output layouts at
// load, then JAX's get_parameter_layouts and get_output_layouts).
#include <string>

#include "impl.h"

// The bytes handed out by MemoryLayout_Serialize: a copy, so they outlive the layout.
struct PJRT_Layouts_SerializedLayout {
  std::string bytes;
};

namespace openhlo {

PJRT_Layouts_MemoryLayout RowMajorLayout(size_t rank, bool owned_by_executable) {
  // What jaxlib's PjRtLayout::Deserialize parses: xla::Layout's text form, minor_to_major
  // ("{2,1,0}" for rank 3, "{}" for scalars).
  PJRT_Layouts_MemoryLayout layout;
  layout.owned_by_executable = owned_by_executable;
  layout.serialized = "{";
  for (size_t d = rank; d-- > 0;)
    layout.serialized += std::to_string(d) + (d > 0 ? "," : "");
  layout.serialized += "}";
  return layout;
}

namespace {

PJRT_Error* LayoutDestroy(PJRT_Layouts_MemoryLayout_Destroy_Args* a) {
  if (!a->layout->owned_by_executable) delete a->layout;
  return nullptr;
}

void SerializedDelete(PJRT_Layouts_SerializedLayout* serialized) { delete serialized; }

PJRT_Error* LayoutSerialize(PJRT_Layouts_MemoryLayout_Serialize_Args* a) {
  auto* serialized = new PJRT_Layouts_SerializedLayout{a->layout->serialized};
  a->serialized_bytes = serialized->bytes.data();
  a->serialized_bytes_size = serialized->bytes.size();
  a->serialized_layout = serialized;
  a->serialized_layout_deleter = SerializedDelete;
  return nullptr;
}

PJRT_Error* ClientDefaultLayout(PJRT_Layouts_DefaultLayout_Args* a) {
  a->layout = new PJRT_Layouts_MemoryLayout(RowMajorLayout(a->num_dims, false));
  return nullptr;
}

PJRT_Error* BufferMemoryLayout(PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args* a) {
  a->layout = new PJRT_Layouts_MemoryLayout(RowMajorLayout(a->buffer->dims.size(), false));
  return nullptr;
}

PJRT_Error* TopologyDefaultLayout(PJRT_Layouts_DefaultLayout_Args*) {
  // Client_TopologyDescription is unimplemented, so no topology of ours can reach here.
  return MakeError(PJRT_UNIMPLEMENTED,
                   "openhlo PJRT_Layouts_PJRT_Topology_GetDefaultLayout: the plugin has no "
                   "topology descriptions");
}

PJRT_Error* ExecutableOutputLayouts(PJRT_Layouts_Executable_Args* a) {
  Compiled& c = *a->executable->compiled;
  a->num_values = c.output_layout_ptrs.size();
  a->layouts = c.output_layout_ptrs.data();
  return nullptr;
}

PJRT_Error* ExecutableParameterLayouts(PJRT_Layouts_Executable_Args* a) {
  Compiled& c = *a->executable->compiled;
  a->num_values = c.parameter_layout_ptrs.size();
  a->layouts = c.parameter_layout_ptrs.data();
  return nullptr;
}

}  // namespace

PJRT_Extension_Base* LayoutsExtension(PJRT_Extension_Base* next) {
  static PJRT_Layouts_Extension extension = {
      {sizeof(PJRT_Layouts_Extension), kExtensionLayouts, nullptr},
      LayoutDestroy, LayoutSerialize, ClientDefaultLayout, BufferMemoryLayout,
      TopologyDefaultLayout, ExecutableOutputLayouts, ExecutableParameterLayouts};
  extension.base.next = next;
  return &extension.base;
}

}  // namespace openhlo
