"""The controller runtime: API client, informers and cache, work queues, the manager, leader
election, Events; it knows no reconciler."""
