// A Module's parameters in a safetensors file (paddle_like/io/safetensors.h).
//
// Module files: SaveModule writes every dense parameter under its NamedParameters()
// name, F32 with its shape, and every sparse table's held rows as "<name>" F32
// (rows, dim) plus "<name>.ids" I64 (rows), rows sorted by id, then every buffer
// (Module::NamedBuffers) under its name with its dtype and shape. LoadModule checks the
// whole file against the module before changing anything (a buffer missing from the
// file is NOT_FOUND like a parameter; a module without buffers loads files written
// before buffers existed); tensors in the file that the module lacks are ignored.
//
// Thread-safety: the functions are thread-safe for distinct paths and modules.
#ifndef PADDLE_LIKE_NN_MODULE_FILE_H_
#define PADDLE_LIKE_NN_MODULE_FILE_H_

#include <map>
#include <string>

#include "paddle_like/core/status.h"
#include "paddle_like/core/tensor.h"
#include "paddle_like/nn/module.h"

namespace pl {

Status SaveModule(const std::string& path, Module& module);
// Missing tensors are NOT_FOUND, wrong shapes or dtypes INVALID_ARGUMENT; the message
// lists every problem (parameter, expected and found shapes). On any error the module
// is left as it was.
Status LoadModule(const std::string& path, Module& module);

// What LoadModuleTensors does with a parameter absent from its tensors.
enum class MissingParameters { kError, kKeep };
// LoadModule's checks and installation over tensors already in memory, named and laid
// out as SaveModule writes them (Python's load_state_dict). `source` starts the error
// message ("LoadModule '<path>'", "load_state_dict"). Under kKeep a parameter or buffer
// absent from `tensors` keeps its values, but an embedding table given without its ".ids"
// (or the reverse) is still NOT_FOUND.
Status LoadModuleTensors(const std::map<std::string, Tensor>& tensors, Module& module,
                         const std::string& source,
                         MissingParameters missing = MissingParameters::kError);

}  // namespace pl

#endif  // PADDLE_LIKE_NN_MODULE_FILE_H_
