"""Hopper (sm_90, compiled as sm_90a) lowerings: TMA copies and wgmma.

    gemm          a GEMM loop as a TMA + wgmma software pipeline ("wgmma TMA pipeline")
    streamed      the ring of a streamed-attention loop ("streamed attention on wgmma"); its dots
                  are accumulated by `tilenb.codegen.mma.accumulate`
    accumulators  the wgmma accumulator layout swept element by element

Which loops take these paths is the analysis' decision (`tilenb.analysis.lowering`); each module
writes code only through the generation state `g` it receives.
"""
