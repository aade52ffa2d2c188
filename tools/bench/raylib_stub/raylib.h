/* Just enough of raylib's interface for PufferLib's env headers to compile
 * headless: the benchmark never renders, so every call is a no-op. */
#ifndef PRONGHORN_RAYLIB_STUB_H_
#define PRONGHORN_RAYLIB_STUB_H_

typedef struct Color {
  unsigned char r, g, b, a;
} Color;
typedef struct Vector2 {
  float x, y;
} Vector2;
enum { KEY_ESCAPE = 256, KEY_TAB = 258 };

static inline void InitWindow(int w, int h, const char* t) { (void)w, (void)h, (void)t; }
static inline void SetTargetFPS(int fps) { (void)fps; }
static inline void CloseWindow(void) {}
static inline int IsKeyDown(int key) {
  (void)key;
  return 0;
}
static inline int IsKeyPressed(int key) {
  (void)key;
  return 0;
}
static inline void ToggleFullscreen(void) {}
static inline void BeginDrawing(void) {}
static inline void EndDrawing(void) {}
static inline void ClearBackground(Color c) { (void)c; }
static inline void DrawLine(int a, int b, int c, int d, Color e) {
  (void)a, (void)b, (void)c, (void)d, (void)e;
}
static inline void DrawRectangle(int a, int b, int c, int d, Color e) {
  (void)a, (void)b, (void)c, (void)d, (void)e;
}
static inline void DrawLineEx(Vector2 a, Vector2 b, float c, Color d) {
  (void)a, (void)b, (void)c, (void)d;
}
static inline void DrawText(const char* t, int a, int b, int c, Color d) {
  (void)t, (void)a, (void)b, (void)c, (void)d;
}
static inline const char* TextFormat(const char* f, ...) { return f; }

#endif
