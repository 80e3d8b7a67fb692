// The executor of the cpu backend: runs a whole compiled program in C++.
//
// The lowering (pjrt/plugins/cpu/lowering.py) turns a StableHLO function into a Program: a
// list of instructions over numbered slots of one frame (a slot per SSA value of the
// function, nested regions included, so regions see enclosing values without copying).
// Constants are no instructions: their slots are filled when the frame is made, so a loop
// body's constants cost its iterations nothing.
// Control flow (while/if/case) holds nested Programs and loops in C++; an op without a
// native kernel is a CALLBACK instruction that calls back into the Python interpreter for that
// op only. After each instruction the slots whose last use it was are released, so memory
// follows liveness. A compiled Program is immutable: any number of threads may run it at
// once, each with its own Frame. A future fused kernel is just another KERNEL step.
#pragma once

#include <pybind11/pybind11.h>

#include <future>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "async_comm.h"
#include "kernel.h"

namespace openhlo::cpu {

namespace py = pybind11;

// False once the Python interpreter is exiting (set from an atexit hook, before
// finalization): native threads then never take the GIL (a thread that tries during
// finalization is ended by Python with a forced unwind, which aborts the process when it
// crosses a destructor), so Python references they hold are leaked and fallbacks fail.
bool python_usable();
void mark_python_exiting();

// A Python object that may be released from any thread: it takes the GIL to drop its
// reference (and does nothing once the interpreter is finalizing).
class SharedPyObject {
 public:
  SharedPyObject() = default;
  explicit SharedPyObject(py::object obj);
  py::object get() const;  // GIL must be held
  bool is_none() const { return ptr_ == nullptr; }

 private:
  std::shared_ptr<PyObject> ptr_;
};

enum class InstrKind : uint8_t {
  KERNEL,        // step(operands) -> results
  ALIAS,         // results[i] = operands[i] (optimization_barrier, identity)
  WHILE,         // regions: cond (which releases no parameter: it borrows them), body
  IF,            // regions: true, false; operand 0: pred
  CASE,          // regions: branches; operand 0: index
  CALLBACK,      // Python fallback for one op
  REPLICA_ID,
  PARTITION_ID,
  TOKEN,         // results[0] = a new token
  RUN_PARALLEL,  // run `parallel` executables as a grid of threads (interpreter.run_parallel)
  ASYNC_START,   // step(operands) queued on the frame's communication thread; out[0]: handle
  ASYNC_DONE,    // in[0]: a handle; waits for its collective, whose results go to out
};

struct Program;
struct Executable;

// How a KERNEL hands an operand to its step.
enum class Pass : uint8_t {
  VIEW,  // the slot keeps the value past the step: lent uncounted (StorageRef::view)
  MOVE,  // the slot's last use, released here: moved out, so the step may take it over
  COPY,  // released here but also a later operand of the same step: a counted copy, so the
         // later operand's move does not leave it the only reference to write into
};

struct Instr {
  InstrKind kind = InstrKind::KERNEL;
  std::string where;              // "stablehlo.add at f.mlir:3:5", for errors
  std::vector<int32_t> in, out;   // slots
  std::vector<int32_t> release;   // slots dead after this instruction (set_release)
  // Per operand, how a KERNEL passes it: worked out once by set_release, not on every run.
  std::vector<Pass> pass;
  Step step;
  std::vector<std::shared_ptr<const Program>> regions;
  SharedPyObject callback;                        // CALLBACK
  std::vector<TensorSpec> out_specs;              // CALLBACK: result types (tokens: is_token)
  std::vector<bool> out_is_token;
  std::vector<std::shared_ptr<const Executable>> parallel;  // RUN_PARALLEL, replica-major
  int64_t num_partitions = 1;                               // RUN_PARALLEL
  SharedPyObject make_host_states;                          // RUN_PARALLEL
  // KERNEL: a collective, which waits for the frame's communication thread to be idle
  // (async_comm.h: an instance meets its peers in program order).
  bool communicates = false;
};

struct Program {
  std::vector<int32_t> params;   // slots bound on entry
  std::vector<Instr> instrs;
  std::vector<int32_t> results;  // slots returned
};

struct Executable {
  std::string name;
  int32_t num_slots = 0;
  std::shared_ptr<const Program> main;
  // (slot, value) of every constant of the program, its regions included. No program
  // defines or releases these slots, so no step ever holds a constant's only reference:
  // it is read, never moved out or written in place.
  std::vector<std::pair<int32_t, Array>> constants;
  std::vector<TensorSpec> param_specs, result_specs;
  std::vector<bool> param_is_token, result_is_token;
};

struct Frame {
  std::vector<Array> slots;
  // A KERNEL's operands, gathered from their slots (steps take a pointer to contiguous
  // Arrays). Kept from one instruction to the next with their storage dropped: copying a slot
  // into one then reuses its shape's memory instead of allocating it, once per operand and
  // iteration of a loop.
  std::vector<Array> operands;
  ExecContext ctx;
  SharedPyObject host_state;  // passed to CALLBACK instructions (None when unset)
  // Collectives started and not yet done, by handle slot. Each holds its operands until it
  // has run, so they stay alive (and, being shared, are never written in place) however
  // early liveness releases their slots.
  std::unordered_map<int32_t, std::shared_future<std::vector<Array>>> started;
  std::unique_ptr<CommThread> comm;  // made by the first ASYNC_START; declared last, so
                                     // it is joined first when the frame goes
};

// Sets the slots dead after `instr` (and with them how its operands are passed).
void set_release(Instr& instr, std::vector<int32_t> slots);

// Runs `exe` on `args` in a new frame; returns its results. Throws ExecError (or the Python
// exception of a failed callback) naming the instruction.
std::vector<Array> run_executable(const Executable& exe, std::vector<Array> args,
                                  const ExecContext& ctx, const SharedPyObject& host_state);

// The Python object a token is converted to in callbacks (stablehlo's TOKEN).
void set_token_object(py::object token);
// Whether `value` is that object: what a token parameter takes (GIL must be held).
bool is_token_object(const py::handle& value);

// Binding helpers (module.cc): build Programs from the lowering's description.
void bind_executor(py::module_& m);

}  // namespace openhlo::cpu
