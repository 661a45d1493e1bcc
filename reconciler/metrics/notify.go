package metrics

import "github.com/prometheus/client_golang/prometheus"

// Notifications (notify/, docs/notifications.md), by the Provider's
// namespace and name: bounded by the Providers people create.
var (
	notificationsSent = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kontinue_notifications_sent_total",
		Help: "Notifications a provider's receiver accepted (a grouped message counts once), by the provider's namespace and name.",
	}, []string{"namespace", "provider"})
	notificationsDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kontinue_notifications_dropped_total",
		Help: "Notification events not delivered, by the provider's namespace and name and reason: queue-full (the provider's bounded queue), failed (refused by the receiver, or retries spent), refused (an address Kontinue does not send to), invalid (the provider cannot be used).",
	}, []string{"namespace", "provider", "reason"})
)

func init() { Registry.MustRegister(notificationsSent, notificationsDropped) }

// NotificationSent counts n messages a provider's receiver accepted.
func NotificationSent(namespace, provider string, n int) {
	notificationsSent.WithLabelValues(namespace, provider).Add(float64(n))
}

// NotificationDropped counts n events of a provider not delivered.
func NotificationDropped(namespace, provider, reason string, n int) {
	notificationsDropped.WithLabelValues(namespace, provider, reason).Add(float64(n))
}
