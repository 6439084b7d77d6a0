//===- AddMaskInputPass.cpp - attn-add-mask-input -------------------------===//
//
// torch's attn_mask as a tensor input of a kernel (Passes.td has the contract):
// a keep table and-ed into the kernel's mask, or a score bias added after its
// mod. The regions it writes are ordinary attn regions, so classification,
// derivatives and every schedule treat them like hand-written ones.
//
//===----------------------------------------------------------------------===//
#include "passes/PassOptions.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/StringSwitch.h"

#include <limits>

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNADDMASKINPUT
#include "passes/Passes.h.inc"

namespace {

/// The input's name: attn.masks (runtime/python/attn/masks.py) fills the input by it.
constexpr StringLiteral kMaskInputName = "attn_mask";

enum class MaskKind { Keep, Additive, LearnableAdditive };

/// `op` (the kernel's mask or score) to be edited for `kernel` alone: `op` itself
/// when nothing else refers to it, else a copy named after the kernel, placed
/// before it (another kernel sharing `op` must not change).
template <typename OpTy> OpTy ownedBy(KernelOp kernel, OpTy op, SymbolTable &symbols) {
  auto module = kernel->getParentOfType<ModuleOp>();
  std::optional<SymbolTable::UseRange> uses = SymbolTable::getSymbolUses(op, module);
  bool shared = !uses || llvm::any_of(*uses, [&](const SymbolTable::SymbolUse &use) {
    return use.getUser() != kernel.getOperation();
  });
  if (!shared)
    return op;
  auto copy = cast<OpTy>(op->clone());
  copy.setSymName((kernel.getSymName() + "_" + op.getSymName()).str());
  symbols.insert(copy, kernel->getIterator()); // renamed on a clash
  return copy;
}

/// The table's element at the pair's indices (b, h, i, j), read before `yield`.
Value readTable(OpBuilder &b, Location loc, Type element, ValueRange pairIndices) {
  return ReadOp::create(b, loc, element, FlatSymbolRefAttr::get(b.getStringAttr(kMaskInputName)),
                        pairIndices);
}

/// Whether the table keeps a pair, from the pair's indices (b, h, i, j).
using KeepOf = function_ref<Value(OpBuilder &, Location, ValueRange)>;

/// The i8 keep table keeps the pairs whose entry is nonzero.
Value keepTableKeeps(OpBuilder &b, Location loc, ValueRange pairIndices) {
  IntegerType i8 = b.getI8Type();
  Value entry = readTable(b, loc, i8, pairIndices);
  Value zero = arith::ConstantOp::create(b, loc, i8, b.getIntegerAttr(i8, 0));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, entry, zero);
}

/// Makes the kernel keep a pair only where `keepOf` holds: a new mask, or the
/// existing mask's result `and` it.
void restrictMask(KernelOp kernel, SymbolTable &symbols, KeepOf keepOf) {
  Location loc = kernel.getLoc();
  MaskOp mask = kernel.getMaskOp();
  if (!mask) {
    OpBuilder b(kernel);
    mask = MaskOp::create(b, loc, b.getStringAttr(kernel.getSymName() + "_mask"));
    Type index = b.getIndexType();
    Block *body =
        b.createBlock(&mask.getBody(), {}, {index, index, index, index}, {loc, loc, loc, loc});
    YieldOp::create(b, loc, keepOf(b, loc, body->getArguments()));
    symbols.insert(mask); // renamed on a clash
  } else {
    mask = ownedBy(kernel, mask, symbols);
    Block &body = mask.getBody().front();
    auto yield = cast<YieldOp>(body.getTerminator());
    OpBuilder b(yield);
    Value keep = keepOf(b, loc, body.getArguments());
    yield->setOperand(0, arith::AndIOp::create(b, loc, yield.getValue(), keep));
  }
  kernel.setMaskAttr(FlatSymbolRefAttr::get(mask.getSymNameAttr()));
}

/// Adds the float table to the kernel's final score: after its mod, or as a new mod.
/// Pairs whose entry is -inf are masked as well: that is what torch's additive
/// masks mean, and a row whose every score were -inf would give NaN, where a
/// masked row gives 0.
void addTableToScore(KernelOp kernel, FloatType type, SymbolTable &symbols) {
  Location loc = kernel.getLoc();
  ScoreOp score = kernel.getScoreOp();
  if (score) {
    score = ownedBy(kernel, score, symbols);
  } else { // the default score, q·k/sqrt(d), is scaled_dot without a scale
    OpBuilder b(kernel);
    score = ScoreOp::create(b, loc, b.getStringAttr(kernel.getSymName() + "_score"),
                            ContractKindAttr::get(b.getContext(), ContractKind::ScaledDot),
                            /*scale=*/nullptr, /*hidden=*/nullptr, b.getStrArrayAttr({}),
                            b.getDenseF64ArrayAttr({}), /*weight_names=*/nullptr,
                            /*weight_shapes=*/nullptr, /*weight_inits=*/nullptr);
    symbols.insert(score); // renamed on a clash
  }
  kernel.setScoreAttr(FlatSymbolRefAttr::get(score.getSymNameAttr()));

  if (!score.hasMod()) { // the identity mod: (s, b, h, i, j, params...) -> s
    OpBuilder b(score);
    Type index = b.getIndexType();
    SmallVector<Type> arguments{type, index, index, index, index};
    arguments.append(score.getNumParams(), type);
    SmallVector<Location> locs(arguments.size(), loc);
    Block *body = b.createBlock(&score.getMod(), {}, arguments, locs);
    YieldOp::create(b, loc, body->getArgument(0));
  }
  Block &body = score.getMod().front();
  auto yield = cast<YieldOp>(body.getTerminator());
  OpBuilder b(yield);
  Value bias = readTable(b, loc, type, body.getArguments().slice(1, 4));
  yield->setOperand(0, arith::AddFOp::create(b, loc, yield.getValue(), bias));
  restrictMask(kernel, symbols, [&](OpBuilder &mb, Location mloc, ValueRange pairIndices) {
    Value entry = readTable(mb, mloc, type, pairIndices);
    Value minusInfinity = arith::ConstantOp::create(
        mb, mloc, type, mb.getFloatAttr(type, -std::numeric_limits<double>::infinity()));
    // une: a NaN entry keeps its pair, so it reaches the output as in torch.
    return arith::CmpFOp::create(mb, mloc, arith::CmpFPredicate::UNE, entry, minusInfinity);
  });
}

struct AddMaskInputPass : impl::AttnAddMaskInputBase<AddMaskInputPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<MaskKind> maskKind = llvm::StringSwitch<std::optional<MaskKind>>(kind)
                                           .Case("bool", MaskKind::Keep)
                                           .Case("additive", MaskKind::Additive)
                                           .Case("learnable-additive", MaskKind::LearnableAdditive)
                                           .Default(std::nullopt);
    if (!maskKind) {
      module.emitError() << "attn-add-mask-input: unsupported kind '" << kind.getValue()
                         << "'; expected bool, additive or learnable-additive";
      return signalPassFailure();
    }
    FailureOr<KernelOp> kernel = selectKernel(module, kernelName);
    if (failed(kernel))
      return signalPassFailure();
    SymbolTable symbols(module);
    if (Operation *existing = symbols.lookup(kMaskInputName)) {
      existing->emitError() << "attn-add-mask-input: the module already has a symbol named @"
                            << kMaskInputName << ", the name of the input it adds; rename it";
      return signalPassFailure();
    }

    auto type = cast<FloatType>((*kernel).getNormalizerOp().getScalarType());
    OpBuilder b(*kernel);
    Type element = *maskKind == MaskKind::Keep ? Type(b.getI8Type()) : Type(type);
    int64_t dynamic = ShapedType::kDynamic;
    auto input = InputOp::create(
        b, kernel->getLoc(), b.getStringAttr(kMaskInputName),
        *maskKind == MaskKind::LearnableAdditive ? b.getUnitAttr() : nullptr, /*init=*/nullptr,
        TypeAttr::get(RankedTensorType::get({dynamic, dynamic, dynamic, dynamic}, element)),
        /*dims=*/nullptr);
    symbols.insert(input);

    if (*maskKind == MaskKind::Keep)
      restrictMask(*kernel, symbols, keepTableKeeps);
    else
      addTableToScore(*kernel, type, symbols);
  }
};
} // namespace
} // namespace mlir::attn
