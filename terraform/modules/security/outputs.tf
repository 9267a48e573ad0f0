output "api_security_group_id" {
  description = "Security group for the Kubernetes API load balancer."
  value       = aws_security_group.api.id
}

output "control_plane_security_group_id" {
  description = "Security group for control-plane nodes."
  value       = aws_security_group.control_plane.id
}

output "worker_security_group_id" {
  description = "Security group for worker nodes."
  value       = aws_security_group.workers.id
}
