/* grad_mode.h — the thread's no-grad depth, for the backward engine (internal). */
#ifndef TS_CORE_GRAD_MODE_H
#define TS_CORE_GRAD_MODE_H

/* Sets this thread's no-grad depth (0: grad mode on) and returns the previous one, so that a
 * backward pass can run its functions with grad mode off, or on under create_graph, whatever the
 * caller's regions, and put the caller's depth back afterwards. */
int tsi_grad_depth_swap(int depth);

#endif /* TS_CORE_GRAD_MODE_H */
