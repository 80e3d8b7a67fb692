"""The reference backend: runs programs with stablehlo's numpy interpreter."""
