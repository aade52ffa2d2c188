// Owner of the shared LibTorch precompiled header (cmake/pronghorn.cmake).
