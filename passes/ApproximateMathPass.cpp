//===- ApproximateMathPass.cpp - attn-approximate-math --------------------===//
#include "passes/Passes.h"

#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::attn {
#define GEN_PASS_DEF_ATTNAPPROXIMATEMATH
#include "passes/Passes.h.inc"

namespace {
/// e^x on 16 f32 lanes as e^r·2^n with n = ⌊x·log2(e) + ½⌋ and r = x − n·ln 2:
/// upstream's Cephes reduction and polynomial, scaled by vscalefps. Upstream
/// builds 2^n from integer bits, which needs n clamped to [-127, 127], a
/// conversion, a shift and an add; vscalefps takes n as a float. x only needs
/// bounds that keep r finite (above 88.8 the result rounds to +∞; NaN passes
/// through). Below ln 2^-126 the result is 0, as upstream's: vscalefps would
/// round it to a denormal, and a denormal weight makes every multiply it
/// enters take a microcode assist (ALiBi's backward, whose far keys' weights
/// fall there, ran 3.3× slower).
struct ScalefExp : OpRewritePattern<math::ExpOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(math::ExpOp op, PatternRewriter &rewriter) const override {
    auto type = dyn_cast<VectorType>(op.getType());
    if (!type || type.getRank() != 1 || type.getNumElements() != 16 ||
        !type.getElementType().isF32() || type.isScalable())
      return rewriter.notifyMatchFailure(op, "not vector<16xf32>");
    ImplicitLocOpBuilder b(op.getLoc(), rewriter);
    auto lanes = [&](double value) -> Value {
      return vector::BroadcastOp::create(
          b, type, arith::ConstantOp::create(b, b.getF32FloatAttr(value)));
    };
    auto fma = [&](Value x, Value y, Value z) -> Value {
      return math::FmaOp::create(b, x, y, z);
    };
    // select(x ≥ bound or NaN, x, bound): one vmaxps / vminps that keeps NaN.
    auto bound = [&](arith::CmpFPredicate keeps, Value x, double limit) -> Value {
      Value edge = lanes(limit);
      return arith::SelectOp::create(b, arith::CmpFOp::create(b, keeps, x, edge), x, edge);
    };
    Value x = bound(arith::CmpFPredicate::UGE, op.getOperand(), -104.0);
    x = bound(arith::CmpFPredicate::ULE, x, 88.8);
    Value n = math::FloorOp::create(b, fma(x, lanes(1.44269504088896341), lanes(0.5)));
    // ln 2 in two parts, so that n·C1 is exact.
    Value r = fma(lanes(-0.693359375), n, x);
    r = fma(lanes(2.12194440e-4), n, r);
    Value p = fma(r, lanes(1.9875691500e-4), lanes(1.3981999507e-3));
    for (double c : {8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1})
      p = fma(p, r, lanes(c));
    p = fma(p, arith::MulFOp::create(b, r, r), r);
    p = arith::AddFOp::create(b, p, lanes(1.0));
    // The lanes at or above ln 2^-126 (and NaN) take p·2^n, the others 0.
    Value normal = arith::CmpFOp::create(b, arith::CmpFPredicate::UGE, op.getOperand(),
                                         lanes(-87.33654475));
    Value normalLanes = vector::ExtractOp::create(
        b, vector::BitCastOp::create(b, VectorType::get({1}, b.getI16Type()), normal),
        ArrayRef<int64_t>{0});
    // _MM_FROUND_CUR_DIRECTION: round as MXCSR says.
    Value currentRounding = arith::ConstantOp::create(b, b.getI32IntegerAttr(4));
    // MLIR 22 passes the operands in order to llvm.x86.avx512.mask.scalef.ps.512,
    // whose order is (a, b, passthrough): so `src` is scaled by 2^⌊a⌋ and `b`
    // fills the masked-off lanes, whatever the op's names say.
    rewriter.replaceOp(op, x86vector::MaskScaleFOp::create(b, type, p, n, lanes(0.0), normalLanes,
                                                           currentRounding));
    return success();
  }
};

struct ApproximateMathPass : impl::AttnApproximateMathBase<ApproximateMathPass> {
  using AttnApproximateMathBase::AttnApproximateMathBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    if (avx512)
      patterns.add<ScalefExp>(&getContext(), /*benefit=*/2);
    populateMathPolynomialApproximationPatterns(patterns, MathPolynomialApproximationOptions{});
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
} // namespace mlir::attn
