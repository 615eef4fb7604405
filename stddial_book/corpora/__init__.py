"""Solve-rate data: histograms of k of n, Big-Math, DeepScaleR, DAPO's Figure 3b, pools."""
